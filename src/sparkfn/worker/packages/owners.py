"""Which tenants hold a stored package, and what each of them knows of it.

A package is stored once per digest (:mod:`sparkfn.worker.packages.store`), but
each tenant that uploaded its bytes holds it apart (``package_owners``): its
own file name, uploader and time. A tenant admin sees, downloads and names
only the packages its tenant holds; another tenant's is answered as a
missing one, so a tenant learns nothing of another's packages, not even that
a digest is stored. A superuser (``owner`` None here) sees every package as
it was first stored.

>>> with store.write() as conn:
...     hold(conn, "sha256:...", "acme", filename="fn.py", who="alice")
True
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, select
from sqlalchemy.dialects import postgresql, sqlite

from sparkfn.store import registry_schema
from sparkfn.store.clock import utc_now
from sparkfn.worker.auth.tokens import Principal

_owners = registry_schema.package_owners


def hold(conn: Connection, digest: str, owner: str, *, filename: str, who: str) -> bool:
    """Record that ``owner`` holds ``digest`` (uploaded by ``who`` as ``filename``);
    True if it did not before."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    done = conn.execute(
        dialect.insert(_owners)
        .values(digest=digest, owner=owner, filename=filename, uploaded_by=who,
                uploaded_at=utc_now())
        .on_conflict_do_nothing(index_elements=[_owners.c.digest, _owners.c.owner])
    )  # fmt: skip
    return bool(done.rowcount)


def release(conn: Connection, digest: str, owner: str) -> None:
    """``owner`` no longer holds ``digest``."""
    conn.execute(_owners.delete().where(_owners.c.digest == digest, _owners.c.owner == owner))


def held(conn: Connection, digest: str, owner: str) -> Row[Any] | None:
    """``owner``'s record of ``digest``, or None if it does not hold it."""
    query = select(_owners).where(_owners.c.digest == digest, _owners.c.owner == owner)
    return conn.execute(query).first()


def holdings(conn: Connection, owner: str) -> dict[str, Row[Any]]:
    """Every package ``owner`` holds: its record by digest."""
    rows = conn.execute(select(_owners).where(_owners.c.owner == owner)).all()
    return {row.digest: row for row in rows}


def is_held(conn: Connection, digest: str) -> bool:
    """Whether any tenant holds ``digest``."""
    query = select(_owners.c.owner).where(_owners.c.digest == digest).limit(1)
    return conn.execute(query).first() is not None


def path_owner(path: str) -> str | None:
    """The tenant an upload path is under (``acme/fn.zip``: ``acme``), if it has one."""
    owner, slash, _ = path.partition("/")
    return owner if slash and owner else None


def viewer(principal: Principal) -> str | None:
    """Whose packages ``principal`` sees: a tenant admin its tenant's, a superuser every one (None)."""
    return None if principal.is_superuser else (principal.tenant or "")
