"""The assignment in the store: the leader writes only what changed, in its own term."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select, update

from sparkfn import StaleLeaderError
from sparkfn.runtime.lifecycle import control
from sparkfn.store.cluster_schema import cluster_assignments, cluster_workers
from sparkfn.store.schema import function_runs
from sparkfn.store.store import Store
from sparkfn.worker.cluster.assignment import Assignment, InstanceKey, Worker, rebalance
from sparkfn.worker.cluster.assignment_store import read_assignments, write_plan
from sparkfn.worker.cluster.handover import Handover, old_run
from sparkfn.worker.cluster.leader_lock import record_leader
from sparkfn.worker.cluster.membership import Membership
from waiting import until


def test_the_leader_writes_what_changed_and_a_replaced_leader_nothing(store: Store) -> None:
    term = record_leader(store, "a")
    instances = [Assignment(InstanceKey("public/default/f", i)) for i in range(6)]
    first = rebalance([Worker("a", 10), Worker("b", 10)], instances)
    assert write_plan(store, instances, first, term=term) == 6
    stored = read_assignments(store)
    assert sorted(stored, key=lambda a: a.instance) == sorted(
        first.assignments.values(), key=lambda a: a.instance
    )
    second = rebalance([Worker("a", 10), Worker("b", 10), Worker("c", 10)], stored)
    assert write_plan(store, stored, second, term=term) == second.moved == 2
    assert {a.instance for a in read_assignments(store, "c")} == {
        k for k, a in second.assignments.items() if a.worker_id == "c"
    }
    newer = record_leader(store, "b")  # a new leader: the old one's writes are refused
    third = rebalance([Worker("a", 10)], read_assignments(store))
    with pytest.raises(StaleLeaderError, match=f"term {term} may not write.*now {newer}"):
        write_plan(store, read_assignments(store), third, term=term)
    assert len(read_assignments(store, "c")) == 2


def test_a_plan_that_moves_ten_thousand_instances_is_written_whole(store: Store) -> None:
    term = record_leader(store, "a")
    instances = [Assignment(InstanceKey(f"public/default/f{i}", 0)) for i in range(10_000)]
    first = rebalance([Worker("a", 10_000)], instances)
    assert write_plan(store, instances, first, term=term) == 10_000
    moved = rebalance([Worker("b", 10_000)], read_assignments(store))  # a left: all move
    assert write_plan(store, read_assignments(store), moved, term=term) == 10_000
    assert {a.worker_id for a in read_assignments(store)} == {"b"}


def _members(store: Store) -> dict[str, Membership]:
    """Workers a and b, members of the store's cluster (one of them leads)."""
    members = {w: Membership(store, w, host="h", port=1, lease=30) for w in "ab"}
    for member in members.values():
        member.start()
    return members


def _term(members: dict[str, Membership]) -> int:
    leader = until(lambda: next((m for m in members.values() if m.is_leader), None), "a leader", 30)
    return leader.term


def _run_epoch(store: Store, fqfn: str) -> int:
    record = control.read_control(store, fqfn)
    assert record is not None
    return record.epoch


def test_a_run_moved_off_a_live_worker_is_handed_over_and_off_a_departed_one_fenced(
    pg_store: Store,
) -> None:
    """A drain moves the run without bumping its run epoch: the row names the worker it
    left and the epoch that worker runs, and the new owner waits until that run ended
    (or its deadline passed); a move off a departed worker fences the run at once."""
    fqfn, members = "public/default/f", _members(pg_store)
    try:
        term = _term(members)
        control.begin_run(pg_store, fqfn, "function", 1, "test")
        instances = [Assignment(InstanceKey(fqfn, 0))]
        first = rebalance([Worker("a", 10)], instances)
        write_plan(pg_store, instances, first, term=term)
        ran = _run_epoch(pg_store, fqfn)  # placed: fenced as ever (nothing ran it before)
        current = read_assignments(pg_store)
        drain = rebalance([Worker("a", 0), Worker("b", 10)], current)
        write_plan(pg_store, current, drain, term=term)
        (moved,) = read_assignments(pg_store)
        assert (moved.worker_id, moved.previous) == ("b", "a")
        assert _run_epoch(pg_store, fqfn) == ran  # not fenced: a's run goes on to its end
        assert old_run(pg_store, fqfn) == ("a", ran, "STARTING")
        handover = Handover(pg_store, deadline=60)
        assert handover.waits_for(fqfn, moved.epoch) == (
            f"worker a's run (epoch {ran}) has not ended (STARTING)"
        )
        assert handover.pending()
        with pg_store.write() as conn:  # a suspended the run: its record ended
            conn.execute(update(function_runs).values(state="SUSPENDED"))
        assert handover.waits_for(fqfn, moved.epoch) is None
        assert not handover.pending()
        with pg_store.write() as conn:  # the run again (b's start), for the deadline's case
            conn.execute(update(function_runs).values(state="RUNNING"))
        late = Handover(pg_store, deadline=0.3)
        assert late.waits_for(fqfn, moved.epoch) is not None
        time.sleep(0.3)
        assert late.waits_for(fqfn, moved.epoch) is None  # past its deadline: start (fences)
        members["b"].close()  # b departs: its run moves back to a, fenced at once
        term = _term({"a": members["a"]})  # a leads now, if b did
        current = read_assignments(pg_store)
        back = rebalance([Worker("a", 10)], current)
        write_plan(pg_store, current, back, term=term)
        (returned,) = read_assignments(pg_store)
        assert (returned.worker_id, returned.previous) == ("a", None)
        assert _run_epoch(pg_store, fqfn) == ran + 1
        assert old_run(pg_store, fqfn) is None
    finally:
        for member in members.values():
            member.close()


def test_a_hand_over_waits_no_longer_once_the_old_owner_rejoined_or_left(pg_store: Store) -> None:
    fqfn, members = "public/default/g", _members(pg_store)
    try:
        term = _term(members)
        control.begin_run(pg_store, fqfn, "function", 1, "test")
        instances = [Assignment(InstanceKey(fqfn, 0))]
        write_plan(pg_store, instances, rebalance([Worker("a", 10)], instances), term=term)
        current = read_assignments(pg_store)
        write_plan(
            pg_store, current, rebalance([Worker("a", 0), Worker("b", 10)], current), term=term
        )
        assert old_run(pg_store, fqfn) is not None
        with pg_store.write() as conn:  # a joined again since the move (a restart, say)
            conn.execute(
                update(cluster_workers)
                .where(cluster_workers.c.worker_id == "a")
                .values(joined_at=func.clock_timestamp())
            )
        assert old_run(pg_store, fqfn) is None
        with pg_store.write() as conn:
            conn.execute(
                update(cluster_workers)
                .where(cluster_workers.c.worker_id == "a")
                .values(
                    joined_at=select(cluster_assignments.c.assigned_at)
                    .where(cluster_assignments.c.control_id == fqfn)
                    .scalar_subquery()
                )
            )
        assert old_run(pg_store, fqfn) is not None
        members["a"].close()  # a leaves (or its lease runs out): nothing to wait for
        until(lambda: old_run(pg_store, fqfn) is None, "the hand-over given up", 5)
    finally:
        for member in members.values():
            member.close()
