"""Membership on a real PostgreSQL: leases, the leader lock, fencing; SQLite's one worker.

The leader tests run each member in a child process of its own (the
membership alone: no worker, no Spark), so that killing or pausing one is a
real process death or pause with its real PostgreSQL session.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from brokers import wait_for
from sqlalchemy import select

from sparkfn.api.errors import ConfigError, StorageFullError
from sparkfn.store.cluster_schema import cluster_workers
from sparkfn.store.store import Store
from sparkfn.worker.cluster.members import current_leader, live_workers
from sparkfn.worker.cluster.membership import Beat, Membership, MemberState
from waiting import until

CHILD = Path(__file__).with_name("member_child.py")
LEASE = 2.0


class Member:
    """A member child process; its output lines are collected by a thread."""

    def __init__(self, store: Store, worker_id: str, lease: float = LEASE) -> None:
        self.worker_id = worker_id
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), store.url, str(store.data_dir), worker_id, str(lease)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(30)


@pytest.fixture
def members(pg_store: Store) -> Iterator[Callable[[int], dict[str, Member]]]:
    started: list[Member] = []

    def start(count: int, lease: float = LEASE) -> dict[str, Member]:
        started.extend(Member(pg_store, f"m{i}", lease) for i in range(count))
        for member in started:
            wait_for(lambda m=member: "joined" in m.lines, f"{member.worker_id} to join", 60)
        return {m.worker_id: m for m in started}

    yield start
    for member in started:
        member.end()


def _leader(store: Store) -> tuple[str, int] | None:
    found = current_leader(store)
    return None if found is None else (found[0].worker_id, found[1])


def test_killed_leader_is_replaced_within_10_s(pg_store: Store, members: Callable) -> None:
    started = members(3)
    wait_for(lambda: _leader(pg_store) is not None, "a leader", 30)
    leader, term = _leader(pg_store)  # type: ignore[misc]
    assert sum("leader True" in m.lines for m in started.values()) == 1
    killed_at = time.monotonic()
    started[leader].proc.send_signal(signal.SIGKILL)
    wait_for(lambda: (_leader(pg_store) or ("", 0))[1] > term, "a new leader", 10)
    took = time.monotonic() - killed_at
    new_leader, new_term = _leader(pg_store)  # type: ignore[misc]
    assert new_leader != leader and new_term == term + 1, (leader, new_leader, took)
    assert "leader True" in started[new_leader].lines


def test_paused_leader_loses_the_lock_is_fenced_and_rejoins(
    pg_store: Store, members: Callable
) -> None:
    started = members(2)
    wait_for(lambda: _leader(pg_store) is not None, "a leader", 30)
    paused, term = _leader(pg_store)  # type: ignore[misc]
    started[paused].proc.send_signal(signal.SIGSTOP)
    # Its session stays open with the lock: the other ends it once the lease is past.
    wait_for(lambda: (_leader(pg_store) or ("", 0))[1] > term, "a leader after the pause", 20)
    assert _leader(pg_store)[0] != paused  # type: ignore[index]
    started[paused].proc.send_signal(signal.SIGCONT)
    lines = started[paused].lines
    wait_for(lambda: "fenced" in lines, f"{paused} to see it was out: {lines}", 20)
    assert lines.index("leader False") > lines.index("leader True")
    wait_for(lambda: len(live_workers(pg_store)) == 2, "the paused worker to rejoin", 20)
    assert _leader(pg_store)[0] != paused  # type: ignore[index]


def test_member_whose_heartbeat_cannot_be_written_fences_itself(pg_store: Store) -> None:
    fenced = threading.Event()
    member = Membership(pg_store, "stuck", host="h", port=1, lease=1.5, on_fenced=fenced.set)
    member.start()
    first = member.incarnation
    try:
        assert member.state is MemberState.MEMBER and member.is_leader
        # Another session holds the member's row: every heartbeat times out.
        with psycopg.connect(pg_store.url.replace("+psycopg", "")) as blocker:
            blocker.execute("SELECT * FROM cluster_workers WHERE worker_id = 'stuck' FOR UPDATE")
            assert fenced.wait(10), "the member did not fence itself"
            assert member.state is MemberState.OUT and not member.is_leader
        wait_for(lambda: member.state is MemberState.MEMBER, "the member to rejoin", 10)
        assert member.incarnation != first
    finally:
        member.close()
    with pg_store.read() as conn:
        assert conn.execute(select(cluster_workers)).all() == []


def test_a_late_heartbeat_still_written_does_not_fence_and_a_lapsed_one_does(
    pg_store: Store,
) -> None:
    """Under load the heartbeat thread can run later than a lease after its last written
    heartbeat (on its own clock) while the lease still runs on the store's clock, by
    which the others judge. The member put itself out before trying: a leader stepped
    down, a new incarnation rejoined. Now a heartbeat still written keeps it in; one
    that finds the lease past (nothing written for over a lease) puts it out."""
    fenced = threading.Event()
    member = Membership(pg_store, "late", host="h", port=1, lease=1.5, on_fenced=fenced.set)
    member.join()  # no heartbeat thread: the test plays its rounds
    first = member.incarnation
    try:
        member._written_at = time.monotonic() - 3 * member.lease  # its thread was starved
        member._round()
        assert not fenced.is_set()
        assert member.state is MemberState.MEMBER and member.incarnation == first
        assert member.is_leader
        until(lambda: not live_workers(pg_store), "its lease past on the store's clock", 10)
        member._round()
        assert fenced.is_set()
        assert member.state is MemberState.MEMBER and member.incarnation != first  # rejoined
    finally:
        member.close()


def test_a_live_worker_id_is_not_taken_twice(pg_store: Store) -> None:
    first = Membership(pg_store, "same", host="h1", port=1)
    first.start()
    try:
        with pytest.raises(ConfigError, match=r"'same' is in use by a live worker at h1:1"):
            Membership(pg_store, "same", host="h2", port=2).start()
    finally:
        first.close()


def test_sqlite_store_serves_one_worker(sqlite_store: Store) -> None:
    first = Membership(sqlite_store, "one", host="h", port=1)
    first.start()
    try:
        assert first.is_leader
        with pytest.raises(ConfigError, match=r"in use by another worker \(worker one, pid"):
            Membership(sqlite_store, "two", host="h", port=2).start()
    finally:
        first.close()
    second = Membership(sqlite_store, "two", host="h", port=2)
    second.start()  # the first left: the store is free
    second.close()


def test_a_killed_worker_starts_again_at_once_under_its_id(
    pg_store: Store, members: Callable
) -> None:
    """Its lease still runs, but its session is gone: it is dead, its id free."""
    killed = members(1, 60.0)["m0"]
    killed.proc.send_signal(signal.SIGKILL)
    killed.proc.wait(10)
    again = Membership(pg_store, "m0", host="h", port=2, lease=60.0)
    wait_for(lambda: _joined(again), "m0 to start again while its old lease runs", 10)
    try:
        assert [w.port for w in live_workers(pg_store)] == [2]
    finally:
        again.close()


def _joined(member: Membership) -> bool:
    try:
        member.start()
    except ConfigError:
        return False  # the dead session may linger a moment in pg_stat_activity
    return True


def test_a_heartbeat_does_not_say_writes_go_through_again(sqlite_store: Store) -> None:
    """A full disk may leave room for a heartbeat's small update, not for the worker's writes:
    the store's health stays failed until a write of its own succeeds."""
    member = Membership(sqlite_store, "one", host="h", port=1)
    member.start()
    try:
        full = StorageFullError("no space left for a write of the store")
        sqlite_store.health.failed(full)
        assert member.heartbeat() is Beat.WRITTEN
        assert sqlite_store.health.failure is full
    finally:
        member.close()
    assert sqlite_store.health.failure is full
