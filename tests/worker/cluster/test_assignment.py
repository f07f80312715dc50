"""The assignment algorithm's promises, as properties over generated clusters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkfn.worker.cluster.assignment import Assignment, InstanceKey, Plan, Worker, rebalance

capacities = st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=8)


def _workers(caps: list[int], prefix: str = "w") -> list[Worker]:
    return [Worker(f"{prefix}{i}", cap) for i, cap in enumerate(caps)]


def _instances(count: int) -> list[Assignment]:
    return [Assignment(InstanceKey(f"public/default/f{i // 3}", i % 3)) for i in range(count)]


def _check_capacity(plan: Plan, workers: list[Worker]) -> None:
    caps = {w.worker_id: w.capacity for w in workers}
    for worker_id, load in plan.loads().items():
        assert load <= caps[worker_id], f"{worker_id} holds {load} > capacity {caps[worker_id]}"


@settings(max_examples=100, deadline=None)
@given(caps=capacities, count=st.integers(min_value=0, max_value=80))
def test_every_instance_is_assigned_when_capacity_allows_and_none_over_capacity(
    caps: list[int], count: int
) -> None:
    workers = _workers(caps)
    plan = rebalance(workers, _instances(count))
    _check_capacity(plan, workers)
    assigned = sum(plan.loads().values())
    assert assigned == min(count, sum(caps))
    assert plan.placed == assigned and plan.moved == 0
    free = [
        plan.loads().get(w.worker_id, 0)
        for w in workers
        if plan.loads().get(w.worker_id, 0) < w.capacity
    ]
    if free:  # workers below capacity are within one of each other, and of the full ones
        assert max(free) - min(free) <= 1, plan.loads()


@settings(max_examples=100, deadline=None)
@given(caps=capacities, count=st.integers(min_value=1, max_value=80), new_cap=st.integers(1, 12))
def test_a_join_moves_only_what_the_new_worker_takes(
    caps: list[int], count: int, new_cap: int
) -> None:
    workers = _workers(caps)
    before = rebalance(workers, _instances(count))
    joined = [*workers, Worker("new", new_cap)]
    after = rebalance(joined, before.assignments.values())
    _check_capacity(after, joined)
    taken = after.loads().get("new", 0)
    newly_placed = after.placed  # instances that waited for room, now placed
    assert after.moved == taken - newly_placed, (before.loads(), after.loads())
    assert sum(after.loads().values()) == min(count, sum(caps) + new_cap)


@settings(max_examples=100, deadline=None)
@given(caps=st.lists(st.integers(1, 12), min_size=2, max_size=8), count=st.integers(1, 80),
       leaving=st.integers(min_value=0, max_value=7))  # fmt: skip
def test_a_leave_moves_only_the_leavers_instances(
    caps: list[int], count: int, leaving: int
) -> None:
    workers = _workers(caps)
    before = rebalance(workers, _instances(count))
    gone = workers[leaving % len(workers)]
    stay = [w for w in workers if w is not gone]
    after = rebalance(stay, before.assignments.values())
    _check_capacity(after, stay)
    held = before.loads().get(gone.worker_id, 0)
    assert after.moved == held, (before.loads(), after.loads())
    for key, item in after.assignments.items():
        was = before.assignments[key].worker_id
        if was not in (None, gone.worker_id):
            assert item.worker_id == was, f"{key} moved from {was} to {item.worker_id}"
    assert sum(after.loads().values()) == min(count, sum(w.capacity for w in stay))


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(capacities, min_size=1, max_size=6), count=st.integers(0, 60))
def test_epochs_grow_exactly_when_the_owner_changes(steps: list[list[int]], count: int) -> None:
    current = _instances(count)
    for round_, caps in enumerate(steps):  # each round a different set of workers
        plan = rebalance(_workers(caps, prefix=f"r{round_ % 2}-"), current)
        for item in current:
            now = plan.assignments[item.instance]
            if now.worker_id != item.worker_id:
                assert now.epoch == item.epoch + 1
            else:
                assert now.epoch == item.epoch
        current = list(plan.assignments.values())
    again = rebalance(_workers(steps[-1], prefix=f"r{(len(steps) - 1) % 2}-"), current)
    assert again.moved == 0 and again.placed == 0, "a second plan of the same cluster moves nothing"


def test_duplicate_worker_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="worker ids must be unique"):
        rebalance([Worker("a", 1), Worker("a", 2)], _instances(1))


def test_a_move_off_a_live_worker_names_it_and_a_move_off_a_departed_one_does_not() -> None:
    """The new owner of a run moved off a live worker (a join, a drain) waits for that
    worker's run to end; one moved off a departed worker starts at once."""
    first = rebalance(_workers([2, 2]), _instances(4))
    assert all(item.previous is None for item in first.assignments.values())
    joined = rebalance([*_workers([2, 2]), Worker("x", 2)], first.assignments.values())
    moved = [a for k, a in joined.assignments.items() if first.assignments[k] != a]
    assert len(moved) == 1
    (item,) = moved
    assert item.worker_id == "x"
    assert item.previous == first.assignments[item.instance].worker_id
    left = rebalance([Worker("w0", 4)], first.assignments.values())  # w1 departed
    taken = [a for k, a in left.assignments.items() if first.assignments[k].worker_id == "w1"]
    assert len(taken) == 2
    assert {(a.worker_id, a.previous) for a in taken} == {("w0", None)}
    drained = rebalance([Worker("w0", 4), Worker("w1", 0)], first.assignments.values())
    handed = [a for k, a in drained.assignments.items() if first.assignments[k].worker_id == "w1"]
    assert {(a.worker_id, a.previous) for a in handed} == {("w0", "w1")}
