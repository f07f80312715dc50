"""Function packages uploaded to a worker, kept by content digest.

An upload is streamed to a temporary file in the packages directory while
its SHA-256 is computed; over ``max_upload_bytes`` it is refused with
:class:`PackageTooLargeError` and nothing stays on disk. A package is stored
once per digest, under ``<packages dir>/<hex>/<file name>``, and recorded in
the store's ``packages`` table; each function version names the digest of
its package, so an old version can always be shown and started again.

The package kind follows the file name: ``.py`` (a single function file).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import Row, select

from sparkfn.api.errors import PackageError, PackageNotFoundError, PackageTooLargeError
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics.message import utc_now

CHUNK = 1024 * 1024
KINDS = {".py": "py"}
_packages = schema.packages


@dataclass(frozen=True)
class Package:
    """A stored package."""

    digest: str  # sha256:<hex>
    filename: str
    kind: str
    size_bytes: int
    uploaded_by: str
    uploaded_at: datetime
    path: Path  # the stored file

    @property
    def entry(self) -> Path:
        """What a function config's ``py`` names for this package."""
        return self.path


class PackageStore:
    """Uploaded packages of one worker's store and data dir."""

    def __init__(self, store: Store, root: Path, *, max_upload_bytes: int) -> None:
        self.store = store
        self.root = root
        self.max_upload_bytes = max_upload_bytes

    def save(self, stream: BinaryIO, filename: str, *, who: str) -> Package:
        """Store what ``stream`` holds as ``filename``; the stored package (the same one if known)."""
        name = _clean_name(filename)
        kind = _kind(name)
        self.root.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(dir=self.root, prefix=".upload-")
        temp = Path(temp_name)
        try:
            digest, size = self._copy(stream, os.fdopen(fd, "wb"), name)
            found = self._row(digest)
            if found is not None:
                return found
            target = self.root / digest.removeprefix("sha256:") / name
            target.parent.mkdir(parents=True, exist_ok=True)
            temp.replace(target)
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
            package = self._row(digest)
            assert package is not None
            return package
        finally:
            temp.unlink(missing_ok=True)

    def get(self, digest: str) -> Package:
        """The package stored under ``digest``; :class:`PackageNotFoundError` if none."""
        found = self._row(digest)
        if found is None:
            msg = f"no package is stored under {digest}"
            raise PackageNotFoundError(msg)
        return found

    def list(self) -> list[Package]:
        """Every stored package, newest first."""
        with self.store.read() as conn:
            rows = conn.execute(select(_packages).order_by(_packages.c.uploaded_at.desc())).all()
        return [self._package(row) for row in rows]

    def read(self, digest: str) -> Iterator[bytes]:
        """The stored file's bytes, in chunks."""
        path = self.get(digest).path
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk

    def _copy(self, stream: BinaryIO, out: BinaryIO, name: str) -> tuple[str, int]:
        sha = hashlib.sha256()
        size = 0
        with out:
            while chunk := stream.read(CHUNK):
                size += len(chunk)
                if size > self.max_upload_bytes:
                    msg = (
                        f"package {name} is larger than the worker's limit of "
                        f"{self.max_upload_bytes} bytes"
                    )
                    raise PackageTooLargeError(msg)
                sha.update(chunk)
                out.write(chunk)
        if size == 0:
            msg = f"package {name} is empty"
            raise PackageError(msg)
        return f"sha256:{sha.hexdigest()}", size

    def _row(self, digest: str) -> Package | None:
        with self.store.read() as conn:
            row = conn.execute(select(_packages).where(_packages.c.digest == digest)).first()
        return self._package(row) if row is not None else None

    def _package(self, row: Row[Any]) -> Package:
        return Package(
            digest=row.digest,
            filename=row.filename,
            kind=row.kind,
            size_bytes=row.size_bytes,
            uploaded_by=row.uploaded_by,
            uploaded_at=row.uploaded_at,
            path=self.root / row.digest.removeprefix("sha256:") / row.filename,
        )


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
