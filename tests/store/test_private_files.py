"""The data directory is its user's only: 0700, the SQLite store and log files 0600.

A data directory an older sparkfn made (0755, the store 0644) is tightened
when the store opens; other local users could read every config's secrets
and every function's logs before.
"""

from __future__ import annotations

import logging
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from sparkfn.runtime.function.logs import FunctionLogFile, log_file
from sparkfn.store.store import Store


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_directory_is_0700_and_its_sqlite_store_0600(tmp_path: Path) -> None:
    data_dir = tmp_path / "new" / "data"
    store = Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir)
    store.close()
    assert _mode(data_dir) == 0o700
    assert _mode(data_dir / "sparkfn.db") == 0o600


def test_an_existing_readable_data_directory_is_tightened_when_the_store_opens(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir).close()
    data_dir.chmod(0o755)  # as sparkfn made them before
    (data_dir / "sparkfn.db").chmod(0o644)
    Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir).close()
    assert _mode(data_dir) == 0o700
    assert _mode(data_dir / "sparkfn.db") == 0o600


def test_a_function_log_file_is_created_0600(data_dir: Path) -> None:
    path = log_file(data_dir, "public/default/f", 0)
    handler = FunctionLogFile(path, "public/default/f", 0)
    try:
        handler.emit(logging.makeLogRecord({"msg": "a user's record", "levelno": logging.INFO}))
    finally:
        handler.close()
    assert "a user's record" in path.read_text()
    assert _mode(path) == 0o600


def test_tighten_tree_takes_group_and_other_off_every_file(data_dir: Path) -> None:
    from sparkfn.store.private import tighten_tree

    logs = data_dir / "logs" / "functions" / "public"
    logs.mkdir(parents=True)
    old = logs / "instance-0.log"
    old.write_text("written by an older worker\n")
    old.chmod(0o644)
    logs.chmod(0o755)
    tighten_tree(data_dir / "logs")
    assert _mode(old) == 0o600
    assert _mode(logs) == 0o700


# In a child process: can it take the write lock on the database right now?
_TRY_WRITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    conn.execute("BEGIN IMMEDIATE")
except sqlite3.OperationalError as exc:
    print(exc)
else:
    print("took the write lock")
"""


def _other_process_writes(database: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _TRY_WRITE, str(database)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_opening_the_store_again_keeps_the_locks_this_process_holds(tmp_path: Path) -> None:
    """Another Store on the same file, in a process that is writing, leaves its locks be.

    Closing any descriptor of a file drops every POSIX lock the process holds on
    it, SQLite's included: opening the store's files to make them private let a
    second process write beside the first (and, on the ``-shm`` file, have SQLite
    truncate the shared memory under the first, which died of SIGBUS).
    """
    data_dir = tmp_path / "data"
    database = data_dir / "sparkfn.db"
    Store.open(f"sqlite:///{database}", data_dir).close()
    writer = sqlite3.connect(database, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # this process holds the write lock
        assert _other_process_writes(database) == "database is locked"
        Store.open(f"sqlite:///{database}", data_dir).close()
        assert _other_process_writes(database) == "database is locked"
    finally:
        writer.execute("ROLLBACK")
        writer.close()
