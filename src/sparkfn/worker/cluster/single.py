"""A SQLite store serves one worker: an exclusive lock on a file beside the database.

The lock is ``flock`` on ``<database>.worker-lock``: the kernel releases it
when the holding process ends, however it ends, so a worker killed with
SIGKILL never leaves the store locked. The file names the holder, for the
refusal's message.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from sqlalchemy.engine import make_url

from sparkfn.api.errors import ConfigError
from sparkfn.store.store import Store


class SingleWorkerLock:
    """The held lock of the one worker of a SQLite store."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle: IO[str] | None = handle

    @classmethod
    def take(cls, store: Store, worker_id: str) -> SingleWorkerLock:
        """Take the lock of ``store``'s database, or raise :class:`ConfigError` naming its holder."""
        database = make_url(str(store.engine.url)).database or "sparkfn.db"
        path = Path(f"{database}.worker-lock")
        handle = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            msg = (
                f"the SQLite store {database} is in use by another worker ({holder}): a SQLite "
                "store serves one worker; stop that worker, or use a PostgreSQL store "
                "(--store-url postgresql://...) for a cluster of workers"
            )
            raise ConfigError(msg) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"worker {worker_id}, pid {os.getpid()}\n")
        handle.flush()
        return cls(path, handle)

    def release(self) -> None:
        """Release the lock (idempotent); the file stays, naming nobody."""
        if self._handle is not None:
            self._handle.truncate(0)
            self._handle.close()  # closing the file releases the flock
            self._handle = None
