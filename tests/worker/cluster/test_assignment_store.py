"""The assignment in the store: the leader writes only what changed, in its own term."""

from __future__ import annotations

import pytest

from sparkfn import StaleLeaderError
from sparkfn.store.store import Store
from sparkfn.worker.cluster.assignment import Assignment, InstanceKey, Worker, rebalance
from sparkfn.worker.cluster.assignment_store import read_assignments, write_plan
from sparkfn.worker.cluster.leader_lock import record_leader


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
