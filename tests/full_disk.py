"""Real full disks for the tests: a SQLite store at its page limit, and a small tmpfs.

:class:`SqlitePageLimit` caps a store's SQLite database at the pages it has
(``PRAGMA max_page_count`` on every connection of its engine): the real
SQLite then fails every write that needs one more page with ``SQLITE_FULL``,
"database or disk is full", as on a full disk. It works anywhere, so CI
always runs the tests built on it.

:func:`small_filesystem` mounts a tmpfs of a few MiB (root only) and
:func:`fill` takes all of its space: files then fail with a real ``ENOSPC``.
Without root the test is skipped, except under ``CI=true``, where it fails:
CI must never pass by skipping.
"""

from __future__ import annotations

import errno
import os
import pwd
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from sparkfn.store.store import Store


class SqlitePageLimit:
    """``fill()`` stops ``store``'s SQLite file from growing; ``lift()`` gives the room back."""

    def __init__(self, store: Store) -> None:
        assert store.dialect == "sqlite", store.url
        self.store = store
        self.pages: int | None = None
        event.listen(store.engine, "connect", self._on_connect)

    def _on_connect(self, dbapi_conn: Any, _record: Any) -> None:
        if self.pages is not None:
            cursor = dbapi_conn.cursor()
            cursor.execute(f"PRAGMA max_page_count={self.pages}")
            cursor.close()

    def fill(self) -> int:
        """Cap the database at its current size; its pages."""
        with self.store.engine.connect() as conn:
            self.pages = int(conn.exec_driver_sql("PRAGMA page_count").scalar_one())
        self.store.engine.dispose()  # every connection from now on has the cap
        return self.pages

    def lift(self) -> None:
        """Let the database grow again (new connections have no cap)."""
        self.pages = None
        self.store.engine.dispose()


def _not_root(reason: str) -> None:
    msg = f"a small filesystem cannot be mounted: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{msg} (CI=true: the full-disk tests must run, not skip)", pytrace=False)
    pytest.skip(f"{msg}; run as root to test real ENOSPC")


@contextmanager
def small_filesystem(path: Path, size: str = "8m", owner: str | None = None) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (made if needed) for the block; root only.

    With ``owner``, that user owns its root directory (mode 0700).
    """
    if os.geteuid() != 0:
        _not_root("the tests do not run as root")
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}"
    if owner is not None:
        user = pwd.getpwnam(owner)
        options += f",uid={user.pw_uid},gid={user.pw_gid},mode=0700"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        _not_root(f"mount -t tmpfs failed: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(directory: Path) -> Path:
    """Write one file in ``directory`` until its filesystem has no byte left; the file."""
    filler = directory / f"filler-{uuid.uuid4().hex}"
    chunk = b"\xff" * 65536
    with open(filler, "wb", buffering=0) as handle:
        while True:
            try:
                written = handle.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk = chunk[: len(chunk) // 2]  # the last few bytes, down to one
                if not chunk:
                    break
                continue
            if not written:
                break
    assert os.statvfs(directory).f_bavail == 0, "the filesystem still has room"
    return filler
