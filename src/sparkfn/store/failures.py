"""What a failed write means: no space (HTTP 507), a store that is unavailable (503), or a bug.

Every write of sparkfn goes to the store (:meth:`Store.write`) or to a file
under the data directory (segments, packages: :meth:`Store.writing_files`).
When one fails because the disk, the quota or the database is full, or
because the store cannot take writes just now, the error is rebuilt here as
a :class:`~sparkfn.api.errors.StorageFullError` or a
:class:`~sparkfn.api.errors.StoreUnavailableError` naming what was being
written, so the REST API answers ``{reason, message}`` and the CLI one line.
Any other error is left as it is: it is a bug, and its traceback is wanted.

* :class:`~sparkfn.api.errors.StorageFullError` (HTTP 507): ``ENOSPC`` or
  ``EDQUOT``; SQLite's ``SQLITE_FULL`` and ``SQLITE_IOERR_SHMSIZE`` (its
  shared-memory file cannot grow); PostgreSQL's SQLSTATE 53100 ``disk_full``.
* :class:`~sparkfn.api.errors.StoreUnavailableError` (HTTP 503): ``EROFS`` or
  ``EIO``; SQLite busy, locked, read-only, an I/O error, a file that cannot
  be opened; PostgreSQL's classes 08 (connection), 53 (other resources), 57P
  (shutdown) and 58 (system), a lost connection, a server that does not answer.

Nothing heavy is imported: the CLI consults this on its error path, and
SQLAlchemy's and the drivers' errors are recognised by their attributes.
"""

from __future__ import annotations

import errno
import threading

from sparkfn.api.errors import StorageFullError, StoreError, StoreUnavailableError

NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
UNAVAILABLE_ERRNOS = frozenset({errno.EROFS, errno.EIO})

# SQLite result codes (a primary code is the low byte of an extended one).
_SQLITE_FULL = 13
# The shared-memory file beside a WAL database could not be extended: on a
# full disk, the first error a process that opens the store gets.
_SQLITE_IOERR_SHMSIZE = 4874
_SQLITE_UNAVAILABLE = {
    5: "the database is busy",
    6: "a table is locked",
    8: "the database is read-only",
    10: "a disk I/O error",
    14: "the database file cannot be opened",
}
_PG_DISK_FULL = "53100"
_PG_UNAVAILABLE_CLASSES = ("08", "53", "57P", "58")


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc`` is an ``OSError`` for a full disk or quota."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


def storage_failure(exc: BaseException, what: str) -> StoreError | None:
    """The sparkfn error ``exc`` means while writing ``what``, or None if it is none of these.

    ``what`` names the write ("the store", "segment file segments/...") for
    the message. An error that is already a ``StorageFullError`` or a
    ``StoreUnavailableError`` is returned as it is.
    """
    if isinstance(exc, StorageFullError | StoreUnavailableError):
        return exc
    if isinstance(exc, OSError):
        detail = exc.strerror or str(exc)
        if exc.errno in NO_SPACE_ERRNOS:
            return _full(what, detail)
        if exc.errno in UNAVAILABLE_ERRNOS:
            return _unavailable(what, "the disk refuses writes", detail)
        return None
    driver = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's error
    if driver is None:
        return None
    detail = str(driver).strip().splitlines()[0] if str(driver).strip() else type(driver).__name__
    code = getattr(driver, "sqlite_errorcode", None)
    if isinstance(code, int):
        sqlite = f"SQLite {getattr(driver, 'sqlite_errorname', code)}: {detail}"
        if code & 0xFF == _SQLITE_FULL or code == _SQLITE_IOERR_SHMSIZE:
            return _full(what, sqlite)
        if code & 0xFF in _SQLITE_UNAVAILABLE:
            return _unavailable(what, _SQLITE_UNAVAILABLE[code & 0xFF], sqlite)
        return None
    sqlstate = getattr(driver, "sqlstate", None)
    if sqlstate == _PG_DISK_FULL:
        return _full(what, f"PostgreSQL {sqlstate}: {detail}")
    lost = bool(getattr(exc, "connection_invalidated", False))
    if (isinstance(sqlstate, str) and sqlstate.startswith(_PG_UNAVAILABLE_CLASSES)) or lost:
        why = "the store is unavailable"
        return _unavailable(what, why, f"PostgreSQL {sqlstate or 'connection'}: {detail}")
    if sqlstate is None and type(driver).__name__ == "OperationalError":
        # psycopg's own failures to connect carry no SQLSTATE: the server never answered.
        return _unavailable(what, "the store does not answer", detail)
    return None


def _full(what: str, detail: str) -> StorageFullError:
    return StorageFullError(
        f"no space left to write {what} ({detail}); nothing was written and what was "
        "committed before is kept: free space and retry"
    )


def _unavailable(what: str, why: str, detail: str) -> StoreUnavailableError:
    return StoreUnavailableError(f"cannot write {what}: {why} ({detail}); nothing was written")


class WriteHealth:
    """Whether the last write of a process went through: what ``/ready`` reports.

    Set by a failed write that :func:`storage_failure` recognises, cleared by
    the next write that succeeds. Only a hint for readiness: every write
    still reports its own failure.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failure: StoreError | None = None

    @property
    def failure(self) -> StoreError | None:
        """The error of the last write if it failed, else None."""
        return self._failure

    def failed(self, error: StoreError) -> None:
        """Record that a write failed with ``error``."""
        with self._lock:
            self._failure = error

    def succeeded(self) -> None:
        """Record that a write went through."""
        if self._failure is not None:
            with self._lock:
                self._failure = None
