"""Function packages uploaded to a worker, kept by content digest.

A package is a single ``.py``, a ``.zip`` with the function and its
dependencies, or a wheel (``.whl``); the kind follows the file name. An
upload is streamed into a staging directory under the packages directory
while its SHA-256 is computed, refused past ``max_upload_bytes``, then laid
out for import (:mod:`sparkfn.worker.packages.layout`: a zip is unpacked, its
dependencies installed, ...) and only then moved to ``<packages dir>/<hex>/``
and recorded in the store's ``packages`` table. A refused upload leaves no
file and no row; nor does a package stored by a register or update that is
then refused (:meth:`PackageStore.discard`). A package is stored once per digest; each function version
names the digest of its package, so an old version can always be shown and
started again.

An upload may also be given a *path* (Pulsar's ``functions upload --path``):
the name then points at the package's digest (``package_paths``), and a
register, an update or a download may name the package by it.

>>> packages = PackageStore.from_settings(store, settings)
>>> package = packages.save(open("fn.zip", "rb"), "fn.zip", who="alice", path="team/fn.zip")
>>> packages.resolve("team/fn.zip").digest == package.digest
True
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import Connection, Row, select

from sparkfn.api.errors import PackageError, PackageNotFoundError, PackageTooLargeError
from sparkfn.store import registry_schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.worker.packages import owners
from sparkfn.worker.packages.archives import content_kind
from sparkfn.worker.packages.layout import lay_out
from sparkfn.worker.settings import WorkerSettings

CHUNK = 1024 * 1024
KINDS = {".py": "py", ".zip": "zip", ".whl": "whl"}
DIGEST_PREFIX = "sha256:"
MAX_PATH = 1000  # characters of an upload path (the package_paths column)
_packages = registry_schema.packages
_paths = registry_schema.package_paths
# Moving a laid-out package into place and recording it: one at a time per
# process, so two uploads of the same bytes end with one directory and one row.
_PUBLISH = threading.Lock()
# The upload paths naming each digest.
PathsByDigest = dict[str, list[str]]


@dataclass(frozen=True)
class Package:
    """A stored package."""

    digest: str  # sha256:<hex>
    filename: str
    kind: str
    size_bytes: int
    uploaded_by: str
    uploaded_at: datetime
    path: Path  # the file as uploaded

    @property
    def entry(self) -> Path:
        """What a function config's ``py`` names for this package: the ``.py`` file,
        or the package's directory (a zip's or wheel's, see :mod:`sparkfn.worker.packages.layout`)."""
        return self.path if self.kind == "py" else self.path.parent


@dataclass(frozen=True)
class Upload:
    """What :meth:`PackageStore.upload` stored: the package, and what was new."""

    package: Package
    new_package: bool
    owner: str | None = None  # the tenant it was uploaded for
    new_owner: bool = False  # whether that tenant did not hold it before


class PackageStore:
    """Uploaded packages of one worker's store and data dir."""

    def __init__(
        self,
        store: Store,
        root: Path,
        *,
        max_upload_bytes: int,
        max_expanded_bytes: int,
        index_url: str = "",
    ) -> None:
        self.store = store
        self.root = root
        self.max_upload_bytes = max_upload_bytes
        self.max_expanded_bytes = max_expanded_bytes
        self.index_url = index_url

    @classmethod
    def from_settings(cls, store: Store, settings: WorkerSettings) -> PackageStore:
        """The packages of a worker with ``settings``, recorded in ``store``."""
        return cls(
            store,
            settings.packages_dir.resolve(),
            max_upload_bytes=settings.max_upload_bytes,
            max_expanded_bytes=settings.max_expanded_bytes,
            index_url=settings.package_index_url,
        )

    def save(
        self,
        stream: BinaryIO,
        filename: str,
        *,
        who: str,
        path: str | None = None,
        owner: str | None = None,
    ) -> Package:
        """Store what ``stream`` holds as ``filename``; the stored package (the same one if known).

        With ``path``, that name points at the package from now on. With
        ``owner`` (a tenant), the tenant holds it (:mod:`~sparkfn.worker.packages.owners`)
        and the package is as the tenant sees it.
        """
        return self.upload(stream, filename, who=who, path=path, owner=owner).package

    def upload(
        self,
        stream: BinaryIO,
        filename: str,
        *,
        who: str,
        path: str | None = None,
        owner: str | None = None,
    ) -> Upload:
        """:meth:`save`, saying what it added, for :meth:`discard` to take back."""
        name = _clean_name(filename)
        kind = _kind(name)
        if path is not None:
            _check_path(path)
        with self.store.writing_files(f"package {name} under {self.root}"):
            return self._save(stream, name, kind, who, path, owner)

    def _save(
        self, stream: BinaryIO, name: str, kind: str, who: str, path: str | None, owner: str | None
    ) -> Upload:
        self.root.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(dir=self.root, prefix=".upload-"))
        try:
            upload = stage / name
            digest, size = self._copy(stream, upload, name)
            _check_kind(kind, upload, name)  # before the digest is looked up: no hint of it
            found, new = self._row(digest), False
            if found is None:
                lay_out(
                    kind,
                    upload,
                    stage,
                    max_expanded_bytes=self.max_expanded_bytes,
                    index_url=self.index_url,
                )
                found, new = self._publish(stage, digest, name, kind, size, who)
            new_owner = False
            if owner is not None:
                with self.store.write() as conn:
                    new_owner = owners.hold(conn, digest, owner, filename=name, who=who)
            if path is not None:
                self._name(path, digest, who)
            return Upload(self.get(digest, owner), new, owner, new_owner)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def discard(self, upload: Upload) -> None:
        """Take back what ``upload`` added, the request it came with having been refused.

        The tenant's hold on it goes if it is new, and a package it stored goes
        (row and directory) unless something names it by now: a function
        version, an upload path, a tenant. (A request still between its own
        upload of the same bytes and its registration would then find the
        package gone, and be refused in turn: its code no longer loads.)
        """
        digest = upload.package.digest
        if upload.new_owner and upload.owner is not None:
            with self.store.write() as conn:
                owners.release(conn, digest, upload.owner)
        if not upload.new_package:
            return
        with _PUBLISH:
            with self.store.write() as conn:
                if _named(conn, digest):
                    return
                conn.execute(_packages.delete().where(_packages.c.digest == digest))
            shutil.rmtree(self.root / digest.removeprefix(DIGEST_PREFIX), ignore_errors=True)

    def get(self, digest: str, owner: str | None = None) -> Package:
        """The package stored under ``digest`` (as tenant ``owner`` holds it, if given);
        :class:`PackageNotFoundError` if none (or ``owner`` does not hold it)."""
        with self.store.read() as conn:
            row = conn.execute(select(_packages).where(_packages.c.digest == digest)).first()
            own = owners.held(conn, digest, owner) if row is not None and owner else None
        if row is None or (owner is not None and own is None):
            msg = f"no package is stored under {digest}"
            raise PackageNotFoundError(msg)
        return self._package(row, own)

    def resolve(self, ref: str, owner: str | None = None) -> Package:
        """The package ``ref`` names: a digest (``sha256:<hex>``) or an upload's path
        (as tenant ``owner`` holds it, if given: see :meth:`get`)."""
        if ref.startswith(DIGEST_PREFIX):
            return self.get(ref, owner)
        _check_path(ref)
        with self.store.read() as conn:
            digest = conn.execute(select(_paths.c.digest).where(_paths.c.path == ref)).scalar()
        if digest is None:
            msg = f"no package was uploaded under the path {ref!r} (nor is it a sha256: digest)"
            raise PackageNotFoundError(msg)
        return self.get(digest, owner)

    def list(self, owner: str | None = None) -> list[Package]:
        """Every stored package (that tenant ``owner`` holds, as it holds it), newest first."""
        with self.store.read() as conn:
            rows = conn.execute(select(_packages)).all()
            held = owners.holdings(conn, owner) if owner is not None else None
        if held is None:
            found = [self._package(row) for row in rows]
        else:
            found = [self._package(row, held[row.digest]) for row in rows if row.digest in held]
        return sorted(found, key=lambda p: p.uploaded_at, reverse=True)

    def paths(self) -> PathsByDigest:
        """The upload paths naming each digest."""
        with self.store.read() as conn:
            rows = conn.execute(select(_paths.c.path, _paths.c.digest).order_by(_paths.c.path))
            named: PathsByDigest = {}
            for row in rows:
                named.setdefault(row.digest, []).append(row.path)
        return named

    def _copy(self, stream: BinaryIO, target: Path, name: str) -> tuple[str, int]:
        sha = hashlib.sha256()
        size = 0
        with target.open("wb") as out:
            while chunk := stream.read(CHUNK):
                size += len(chunk)
                if size > self.max_upload_bytes:
                    msg = (
                        f"package {name} is larger than the worker's limit of "
                        f"{self.max_upload_bytes} bytes (max_upload_bytes)"
                    )
                    raise PackageTooLargeError(msg)
                sha.update(chunk)
                out.write(chunk)
        if size == 0:
            msg = f"package {name} is empty"
            raise PackageError(msg)
        return f"{DIGEST_PREFIX}{sha.hexdigest()}", size

    def _publish(
        self, stage: Path, digest: str, name: str, kind: str, size: int, who: str
    ) -> tuple[Package, bool]:
        """Move the laid-out ``stage`` to the digest's directory and record the package;
        the package, and whether this call stored it."""
        target = self.root / digest.removeprefix(DIGEST_PREFIX)
        with _PUBLISH:
            found = self._row(digest)
            if found is not None:  # the same bytes were uploaded meanwhile
                return found, False
            if target.exists():  # left by a worker that died before recording it
                shutil.rmtree(target)
            stage.rename(target)
            try:
                with self.store.write() as conn:
                    conn.execute(
                        _packages.insert().values(
                            digest=digest,
                            filename=name,
                            kind=kind,
                            size_bytes=size,
                            uploaded_by=who,
                            uploaded_at=utc_now(),
                        )
                    )
            except BaseException:
                shutil.rmtree(target, ignore_errors=True)
                raise
        return self.get(digest), True

    def _name(self, path: str, digest: str, who: str) -> None:
        values = {"digest": digest, "uploaded_by": who, "uploaded_at": utc_now()}
        with self.store.write() as conn:
            updated = conn.execute(_paths.update().where(_paths.c.path == path).values(**values))
            if updated.rowcount == 0:
                conn.execute(_paths.insert().values(path=path, **values))

    def _row(self, digest: str) -> Package | None:
        with self.store.read() as conn:
            row = conn.execute(select(_packages).where(_packages.c.digest == digest)).first()
        return self._package(row) if row is not None else None

    def _package(self, row: Row[Any], held: Row[Any] | None = None) -> Package:
        """The package of ``row``, as a tenant's ``held`` record names it, if given."""
        named = held if held is not None else row
        return Package(
            digest=row.digest,
            filename=named.filename,
            kind=row.kind,
            size_bytes=row.size_bytes,
            uploaded_by=named.uploaded_by,
            uploaded_at=named.uploaded_at,
            path=self.root / row.digest.removeprefix(DIGEST_PREFIX) / row.filename,
        )


def _named(conn: Connection, digest: str) -> bool:
    """Whether a function version, an upload path or a tenant names the package ``digest``."""
    versions = registry_schema.function_versions
    for column in (versions.c.package_digest, _paths.c.digest):
        if conn.execute(select(column).where(column == digest).limit(1)).first() is not None:
            return True
    return owners.is_held(conn, digest)


def _clean_name(filename: str) -> str:
    name = Path(filename.replace("\\", "/")).name
    if not name or name in (".", ".."):
        msg = f"package file name {filename!r} is not usable"
        raise PackageError(msg)
    return name


def _kind(name: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix not in KINDS:
        msg = (
            f"package {name}: unknown kind {suffix or '(none)'}; expected one of {', '.join(KINDS)}"
        )
        raise PackageError(msg)
    return KINDS[suffix]


def _check_path(path: str) -> None:
    """An upload path is names joined by single '/': no '.' or '..', nothing empty, no
    backslash or control character, not starting with ``sha256:``."""
    segments = path.split("/")
    odd = any(s in ("", ".", "..") or s != s.strip() for s in segments)
    bad_character = any(c == "\\" or ord(c) < 32 or ord(c) == 127 for c in path)
    if odd or bad_character or len(path) > MAX_PATH or path.startswith(DIGEST_PREFIX):
        msg = (
            f"upload path {path!r} is not usable: give 1 to {MAX_PATH} characters, names "
            "joined by single '/' with no '.' or '..' among them, nothing empty, no backslash "
            f"or control character, not starting with '/' or {DIGEST_PREFIX}"
        )
        raise PackageError(msg)


def _check_kind(kind: str, upload: Path, name: str) -> None:
    """Refuse a package whose bytes are not what its name says (the name gives the kind)."""
    found = content_kind(upload, name)
    if found == kind:
        return
    problems = {
        ("py", "zip"): "is a zip archive, not Python source; upload it as .zip or .whl",
        ("py", "whl"): "is a zip archive, not Python source; upload it as .zip or .whl",
        ("zip", "py"): "is not a zip archive",
        ("whl", "py"): "is not a zip archive",
        ("whl", "zip"): "is not a wheel: it has no *.dist-info/WHEEL at its root",
        ("zip", "whl"): "is a wheel (it has a *.dist-info/WHEEL at its root); upload it as .whl",
    }
    msg = f"package {name} {problems[kind, found]}"
    raise PackageError(msg)
