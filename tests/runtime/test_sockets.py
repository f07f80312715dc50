"""Spark talks to sparkfn's Python processes over Unix sockets, not loopback TCP.

Over TCP each handshake with a query's source runner waited out delayed
acknowledgements (two 50 ms stalls before the runner had its data source),
and so did the exchanges of small tasks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from test_zygote import _wait_for_runners


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
    from sparkfn.store.store import Store
    from sparkfn.topics.admin import TopicAdmin

    store = Store.open(None, data_dir)
    try:
        TopicAdmin(store).create("in")
        query = (
            spark.readStream.format("sparkfn")
            .option("storeUrl", store.url)
            .option("dataDir", str(store.data_dir))
            .option("topic", "in")
            .load()
            .writeStream.format("memory")
            .queryName("socket_probe_query")
            .start()
        )
        try:
            found = {pid: socket_kinds(pid) for pid in _wait_for_runners(query)}
        finally:
            query.stop()
    finally:
        store.close()
    assert found, "no source runner"
    for pid, kinds in found.items():
        assert kinds["tcp"] == 0, (pid, kinds)
        assert kinds["unix"] >= 1, (pid, kinds)
