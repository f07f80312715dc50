"""Files only the worker's user can read: the data directory 0700, what is in it 0600.

The data directory holds users' code (packages), their messages (segments),
their functions' logs and, in a SQLite store, every config with its secrets
(a sink's ``redisPassword``). None of it is for other local users:

* :func:`private_dir` creates a directory 0700, and takes group and other
  permissions off one that exists (a data directory made by an older
  sparkfn was 0755);
* :func:`private_file` does the same for a file, 0600 (the SQLite store,
  which SQLite's ``-wal`` and ``-shm`` files then copy);
* :data:`PRIVATE_UMASK` is the worker process's umask
  (``sparkfn worker start`` sets it before anything is written), so every
  file it, Spark and its Python workers create is its user's only;
* :func:`tighten_tree` takes group and other permissions off everything under
  a directory, for the files an older worker left readable.

A path owned by another user is left as it is: only its owner could change it.

>>> oct(PRIVATE_UMASK)
'0o77'
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077
"""Group and other get nothing of what the worker creates."""

_GROUP_OTHER = stat.S_IRWXG | stat.S_IRWXO


def private_dir(path: Path) -> None:
    """Create ``path`` (and its missing parents) 0700, or tighten it to 0700 if it exists."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(path)


def private_file(path: Path) -> None:
    """Create ``path`` empty 0600 if it is missing, or tighten it to 0600 if it exists.

    An existing file is never opened, only its mode changed: closing any
    descriptor of a file drops every POSIX lock this process holds on it, and
    SQLite's locks are such locks. A store opened again in a process that has
    it open (Spark's Python workers, a worker's routes) would otherwise let
    another process write beside it, or truncate the shared memory of the
    ``-shm`` file under it (SIGBUS).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        os.close(fd)  # a file that did not exist: nobody held a lock on it
    _tighten(path)


def tighten_tree(root: Path) -> None:
    """Take group and other permissions off ``root`` and everything under it."""
    if not root.is_dir():
        return
    _tighten(root)
    for folder, folders, files in os.walk(root):
        for name in (*folders, *files):
            _tighten(Path(folder) / name)


def _tighten(path: Path) -> None:
    """Drop group and other permissions of ``path``, if it is this user's and has any."""
    try:
        found = path.lstat()
    except FileNotFoundError:  # removed meanwhile (a segment compacted away)
        return
    if stat.S_ISLNK(found.st_mode) or found.st_uid != os.getuid():
        return
    if found.st_mode & _GROUP_OTHER:
        with contextlib.suppress(FileNotFoundError):
            path.chmod(stat.S_IMODE(found.st_mode) & ~_GROUP_OTHER)
