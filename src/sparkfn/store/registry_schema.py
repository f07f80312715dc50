"""The worker registry's tables (versions 5, 7 and 11): functions, their versions and packages.

Kept apart from :mod:`sparkfn.store.schema` (which holds the log, the
subscriptions and the runs' tables) but on the same
:data:`~sparkfn.store.schema.metadata`, as :mod:`sparkfn.store.cluster_schema`
is, so a fresh store is created with them and :mod:`sparkfn.store.migrations`
adds them to an old one. Only the worker (:mod:`sparkfn.worker.registry`,
:mod:`sparkfn.worker.packages`) and the store's own upgrades use them.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

from sparkfn.store.schema import metadata

# --- the worker's registry (version 5) ------------------------------------------
# Functions submitted to a worker: what should run, every version of their
# config and code, and the packages that code came in (by content digest).
functions = Table(
    "functions",
    metadata,
    Column("fqfn", String(400), primary_key=True),
    Column("version", Integer, nullable=False),  # the current one
    Column("desired", String(16), nullable=False),  # running | stopped
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # Version 14: how the version before the current one ends (an update's stop mode:
    # drain, suspend); null: drain. The owner that ends it reads it here.
    Column("update_mode", String(16), nullable=True),
)

function_versions = Table(
    "function_versions",
    metadata,
    Column("fqfn", String(400), nullable=False),
    Column("version", Integer, nullable=False),
    Column("config", Text, nullable=False),  # JSON of the FunctionConfig
    Column("package_digest", String(80), nullable=True),
    Column("created_by", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("fqfn", "version"),
)

packages = Table(
    "packages",
    metadata,
    Column("digest", String(80), primary_key=True),  # sha256:<hex>
    Column("filename", String(256), nullable=False),
    Column("kind", String(8), nullable=False),  # py | zip | whl
    Column("size_bytes", BigInteger, nullable=False),
    Column("uploaded_by", String(256), nullable=False),
    Column("uploaded_at", DateTime(timezone=True), nullable=False),
)

REGISTRY_TABLES = (functions, function_versions, packages)

# --- package upload paths (version 7) ------------------------------------------
# Pulsar's ``functions upload --path`` names an upload; sparkfn keeps the name
# pointing at the digest of the last package uploaded under it, so register
# and download can name a package by that path as well as by its digest.
package_paths = Table(
    "package_paths",
    metadata,
    Column("path", String(1000), primary_key=True),
    Column("digest", String(80), nullable=False),  # sha256:<hex>, a packages row
    Column("uploaded_by", String(256), nullable=False),
    Column("uploaded_at", DateTime(timezone=True), nullable=False),
)

PACKAGE_PATH_TABLES = (package_paths,)

# --- package owners (version 11) ---------------------------------------------------
# Who holds a stored package: one row per tenant that uploaded its bytes (or
# whose function or upload path names it), with that tenant's own file name,
# uploader and time. A tenant sees and names only the packages it holds, so
# it learns nothing of another tenant's, not even that a digest is stored.
package_owners = Table(
    "package_owners",
    metadata,
    Column("digest", String(80), nullable=False),  # a packages row
    Column("owner", String(256), nullable=False),  # a tenant
    Column("filename", String(256), nullable=False),
    Column("uploaded_by", String(256), nullable=False),
    Column("uploaded_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("digest", "owner"),
)

PACKAGE_OWNER_TABLES = (package_owners,)
