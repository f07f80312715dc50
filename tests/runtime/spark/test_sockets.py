"""Spark talks to sparkfn's Python processes over Unix sockets, not loopback TCP.

Over TCP each handshake with a query's source runner waited out delayed
acknowledgements (two 50 ms stalls before the runner had its data source),
and so did the exchanges of small tasks.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_zygote import _argv, _descendants, _ppid, source_runners

from sparkfn.runtime.spark.session import (
    LONGEST_SOCKET_DIR,
    SOCKET_DIR_CONF,
    STALE_SOCKET_SECONDS,
    socket_dir,
)


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def _inodes_in(table: str, column: int) -> set[int]:
    path = Path("/proc/net") / table
    if not path.exists():
        return set()
    rows = path.read_text().splitlines()[1:]
    return {int(row.split()[column]) for row in rows if len(row.split()) > column}


def socket_kinds(pid: int) -> dict[str, int]:
    """How many of ``pid``'s sockets are TCP and how many Unix sockets."""
    mine = _socket_inodes(pid)
    tcp = _inodes_in("tcp", 9) | _inodes_in("tcp6", 9)
    unix = _inodes_in("unix", 6)
    return {"tcp": len(mine & tcp), "unix": len(mine & unix)}


def test_a_python_task_talks_to_the_jvm_over_a_unix_socket(spark: Any) -> None:
    # The worker stays (reused) after its task, connected to the JVM for the next one.
    [pid] = spark.sparkContext.parallelize([0], 1).map(lambda _: os.getpid()).collect()
    kinds = socket_kinds(pid)
    assert kinds["tcp"] == 0, kinds
    assert kinds["unix"] >= 1, kinds


def test_a_querys_source_runner_talks_to_the_jvm_over_a_unix_socket(
    spark: Any, data_dir: Path
) -> None:
    with source_runners(spark, data_dir, "socket_probe_query") as runners:
        found = {pid: socket_kinds(pid) for pid in runners}
    assert found, "no source runner"
    for pid, kinds in found.items():
        assert kinds["tcp"] == 0, (pid, kinds)
        assert kinds["unix"] >= 1, (pid, kinds)


def _bound(directory: Path) -> set[Path]:
    table = Path("/proc/net/unix").read_text().splitlines()[1:]
    paths = {Path(fields[7]) for fields in (row.split() for row in table) if len(fields) > 7}
    return {path for path in paths if path.parent == directory}


def test_the_sessions_sockets_are_in_its_own_directory(spark: Any) -> None:
    spark.sparkContext.parallelize([0], 1).map(lambda _: 0).collect()  # a daemon is up
    directory = Path(spark.sparkContext.getConf().get(SOCKET_DIR_CONF))
    assert directory == socket_dir()
    assert directory.stat().st_mode & 0o777 == 0o700
    assert _bound(directory), "no socket of the session's Python processes is in its directory"


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A directory shallow enough for sockets (``tmp_path`` may be too deep)."""
    with tempfile.TemporaryDirectory(prefix="sfs-", dir="/tmp") as root:  # noqa: S108
        yield Path(root)


def test_stale_sockets_are_removed_and_live_or_young_ones_kept(short_root: Path) -> None:
    directory = short_root / f"sparkfn-sockets-{os.getuid()}"
    directory.mkdir(mode=0o700)
    old = time.time() - 2 * STALE_SOCKET_SECONDS

    def bound_at(name: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(directory / name))
        return sock

    live = bound_at(".live.sock")
    live.listen(1)
    bound_at(".stale.sock").close()  # the file stays, as a killed process leaves it
    bound_at(".young.sock").close()
    for name in (".live.sock", ".stale.sock"):
        os.utime(directory / name, (old, old))
    try:
        assert socket_dir(short_root) == directory
        assert sorted(p.name for p in directory.iterdir()) == [".live.sock", ".young.sock"]
    finally:
        live.close()


def test_a_temp_directory_too_deep_for_a_socket_gives_way_to_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * LONGEST_SOCKET_DIR)
    deep.mkdir()
    assert socket_dir(deep) is None  # Spark is then left to talk TCP
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    directory = socket_dir()
    assert directory == Path("/tmp") / f"sparkfn-sockets-{os.getuid()}"
    name = directory / f".{uuid.uuid4()}.sock"  # as Spark and pyspark name theirs
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(name))
    name.unlink()


DAEMONS = (["-m", "pyspark.daemon"], ["-m", "sparkfn.runtime.spark.daemon"])


def test_every_python_daemon_of_the_session_is_forked_by_its_zygote(spark: Any) -> None:
    """Their workers end quietly when Spark retires them (see the next test)."""
    spark.sparkContext.parallelize([0], 1).map(lambda _: 0).collect()
    pids = _descendants(os.getpid())
    daemons = [pid for pid in pids if _argv(pid)[1:3] in DAEMONS]
    managers = [pid for pid in daemons if _argv(_ppid(pid))[1:3] not in DAEMONS]  # not workers
    assert len(managers) >= 2, [_argv(pid) for pid in daemons]  # the lookup's and the tasks'
    for pid in managers:
        assert _argv(_ppid(pid))[1:3] == ["-m", "sparkfn.runtime.spark.zygote"], _argv(pid)


QUIET_PROBE = """
import socket, sys
from pyspark import daemon
from sparkfn.runtime.spark.daemon import quiet
ours, spark = socket.socketpair()
spark.close()  # Spark retired the worker: its connection is closed
worker = quiet(daemon.worker) if sys.argv[1] == "quiet" else daemon.worker
sys.argv[1:] = []  # the daemon reads a worker module from it
print(worker(ours, True))
"""


def test_a_worker_spark_hung_up_on_ends_quietly() -> None:
    env = {**os.environ, "PYTHON_DAEMON_KILL_WORKER_ON_FLUSH_FAILURE": "true"}

    def run(kind: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", QUIET_PROBE, kind]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    spark_own = run("plain")  # what pyspark's daemon does: the traceback
    assert "BrokenPipeError" in spark_own.stderr, spark_own
    ours = run("quiet")
    assert (ours.returncode, ours.stdout.strip(), ours.stderr) == (0, "1", ""), ours
