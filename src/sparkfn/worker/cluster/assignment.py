"""Which worker runs which instance: the leader's assignment, as a pure function.

>>> workers = [Worker("a", capacity=10), Worker("b", capacity=10)]
>>> first = rebalance(workers, [Assignment(InstanceKey("public/default/f", 0))])
>>> first.assignments[InstanceKey("public/default/f", 0)].worker_id
'a'
>>> later = rebalance([*workers, Worker("c", 10)], first.assignments.values())
>>> later.moved   # nothing to take from a and b: one instance over three workers
0

No store, no Spark, no clock: the same inputs give the same plan, so the
leader can compute it, write it in one transaction and a simulation can run
it at scale (``benchmarks/cluster_sim.py``).

What a plan promises:

* **Within capacity.** No worker is given more instances than its capacity;
  every instance is assigned while the live workers' capacity allows it
  (beyond it, the instances already running keep their worker and the rest
  wait, unassigned).
* **Balanced.** Loads are as even as capacities allow: the target of each
  worker is its max-min fair share (water-filling), so two workers not at
  capacity differ by at most one instance.
* **Fewest moves.** An instance stays where it is unless its worker left,
  or its worker is over its target; the new and the under-loaded workers
  take the instances that must move, least loaded first. No other plan
  reaching the targets moves fewer: an instance of a departed worker must
  move, and a worker above its target must shed the excess.
* **Epochs.** An instance's epoch grows by one every time its owner changes
  (to another worker or to none), and never otherwise: a run started under
  an older epoch is stale, and the commit refuses it (DESIGN.md 2.4).
* **Hand-over.** An instance moved off a worker that is still live names it
  (``previous``): its new owner waits for that worker to end its run
  (:mod:`sparkfn.worker.cluster.handover`). One moved off a departed worker,
  placed for the first time, or unassigned names none.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True, order=True)
class InstanceKey:
    """One instance of a function, source or sink: its control id and instance id."""

    control_id: str
    instance_id: int


@dataclass(frozen=True)
class Worker:
    """A live worker and how many instances it may run."""

    worker_id: str
    capacity: int


@dataclass(frozen=True)
class Assignment:
    """Where an instance runs (``worker_id`` None: nowhere yet) under which epoch, and the
    live worker it was moved off (``previous``), whose run its new owner waits for."""

    instance: InstanceKey
    worker_id: str | None = None
    epoch: int = 0
    previous: str | None = None


@dataclass(frozen=True)
class Plan:
    """A rebalance's result: every instance's assignment and how many changed owner."""

    assignments: dict[InstanceKey, Assignment]
    # Instances that had a worker (live or departed) and now have another or none.
    moved: int
    # Instances that had no worker and were given one.
    placed: int

    def loads(self) -> dict[str, int]:
        """Instances per worker (workers with none are absent)."""
        counts: dict[str, int] = {}
        for item in self.assignments.values():
            if item.worker_id is not None:
                counts[item.worker_id] = counts.get(item.worker_id, 0) + 1
        return counts


def targets(workers: Sequence[Worker], total: int, loads: dict[str, int]) -> dict[str, int]:
    """Each worker's target load: ``min(total, capacity)`` shared max-min fairly.

    The lowest level ``L`` at which the workers can hold ``total`` with
    ``min(capacity, L)`` each is found by bisection; every worker gets
    ``min(capacity, L - 1)`` and the rest go one each to workers that can
    take ``L``, those running most now first (they keep one more, so one
    fewer moves), then by id.
    """
    room = sum(w.capacity for w in workers)
    wanted = min(total, room)

    def held(level: int) -> int:
        return sum(min(w.capacity, level) for w in workers)

    low, high = 0, max((w.capacity for w in workers), default=0)
    while low < high:
        middle = (low + high) // 2
        if held(middle) >= wanted:
            high = middle
        else:
            low = middle + 1
    level = low
    quota = {w.worker_id: min(w.capacity, max(level - 1, 0)) for w in workers}
    rest = wanted - sum(quota.values())
    extra = sorted(
        (w for w in workers if w.capacity >= level and level > 0),
        key=lambda w: (-loads.get(w.worker_id, 0), w.worker_id),
    )
    for worker in extra[:rest]:
        quota[worker.worker_id] += 1
    return quota


def rebalance(workers: Sequence[Worker], current: Iterable[Assignment]) -> Plan:
    """The plan for ``current`` over the live ``workers`` (see the module docstring).

    ``current`` holds every instance once; an owner that is not among
    ``workers`` has left, and its instances move.
    """
    by_key = {item.instance: item for item in current}
    live = {w.worker_id for w in workers}
    if len(live) != len(workers):
        msg = f"rebalance: worker ids must be unique, got {[w.worker_id for w in workers]}"
        raise ValueError(msg)
    kept: dict[str, list[InstanceKey]] = {w.worker_id: [] for w in workers}
    for key in sorted(by_key):
        owner = by_key[key].worker_id
        if owner in live:
            kept[owner].append(key)
    quota = targets(workers, len(by_key), {w: len(keys) for w, keys in kept.items()})
    waiting: list[InstanceKey] = []  # instances without a worker, in the order they are placed
    for worker_id, keys in kept.items():
        excess = len(keys) - quota[worker_id]
        if excess > 0:  # shed the last ones by key: the same plan for the same input
            waiting.extend(keys[-excess:])
            del keys[-excess:]
    moving = set(waiting)
    waiting = [k for k in sorted(by_key) if by_key[k].worker_id not in live] + sorted(moving)
    heap = [
        (len(keys), worker_id) for worker_id, keys in kept.items() if len(keys) < quota[worker_id]
    ]
    heapq.heapify(heap)
    result = dict(by_key)
    for key in waiting:
        owner = None
        if heap:
            load, owner = heapq.heappop(heap)
            kept[owner].append(key)
            if load + 1 < quota[owner]:
                heapq.heappush(heap, (load + 1, owner))
        before = by_key[key]
        if owner != before.worker_id:
            handed = before.worker_id if before.worker_id in live and owner else None
            result[key] = replace(before, worker_id=owner, epoch=before.epoch + 1, previous=handed)
    moved = sum(1 for k, v in result.items() if by_key[k].worker_id not in (None, v.worker_id))
    placed = sum(1 for k, v in result.items() if by_key[k].worker_id is None and v.worker_id)
    return Plan(result, moved, placed)
