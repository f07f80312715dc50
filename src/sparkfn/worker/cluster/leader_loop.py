"""The leader's loop: every round it plans the assignment and writes it in its own term.

>>> loop = LeaderLoop(store, member, wanted=lambda: (running_ids, known_ids))
>>> loop.start()      # a thread; rounds do something only while ``member`` leads
>>> loop.close()

Each round (every ``lease / 3`` seconds, and at once when this worker
becomes the leader) reads the live workers and their capacities, the current
assignment and what should run (``wanted``: the control ids whose desired
state is running, and every control id still registered), and then:

* plans the instances that should run with
  :func:`~sparkfn.worker.cluster.assignment.rebalance` (least loaded within
  capacity, fewest moves: a departed worker's instances move, a joining
  worker takes its share); a run moved off a live worker is handed over,
  not fenced (:mod:`~sparkfn.worker.cluster.handover`);
* unassigns the instances that should no longer run (their epoch grows, as
  for any change of owner) and deletes the rows of unregistered ones;
* ends the record of a run whose worker departed and that no live worker
  has room for (:mod:`~sparkfn.worker.cluster.waiting`): it waits, and its
  status says so instead of what the departed worker last wrote;
* writes what changed with
  :func:`~sparkfn.worker.cluster.assignment_store.write_plan`, which refuses
  a leader whose term ended (``StaleLeaderError``) and fences the runs of
  moved instances.

A worker's run is its unit: a function's or a sink's instances run in one
Spark query, and a source's instances in one process, so each is one
instance key (``control id``, 0) in the plan.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import select

from sparkfn.api.errors import StaleLeaderError
from sparkfn.store.cluster_schema import cluster_workers
from sparkfn.store.store import Store
from sparkfn.worker.cluster.assignment import Assignment, InstanceKey, Plan, Worker, rebalance
from sparkfn.worker.cluster.assignment_store import read_assignments, write_plan
from sparkfn.worker.cluster.clock import store_now
from sparkfn.worker.cluster.membership import Membership, MemberState
from sparkfn.worker.cluster.waiting import wait_for_room

log = logging.getLogger(__name__)

# What should run: (control ids whose desired state is running, every registered control id).
Wanted = Callable[[], tuple[set[str], set[str]]]


def live_capacities(store: Store) -> list[Worker]:
    """Every worker whose lease runs, with its capacity, by id."""
    table = cluster_workers
    with store.read() as conn:
        now = store_now(conn)
        rows = conn.execute(
            select(table.c.worker_id, table.c.capacity)
            .where(table.c.lease_expires_at > now)
            .order_by(table.c.worker_id)
        ).all()
    return [Worker(row.worker_id, int(row.capacity)) for row in rows]


def plan_round(store: Store, wanted: Wanted, *, term: int) -> Plan:
    """One round of the leader of ``term``: plan and write; returns the plan written."""
    workers = live_capacities(store)
    current = read_assignments(store)
    running, known = wanted()
    by_key = {item.instance: item for item in current}
    keys = {InstanceKey(cid, 0) for cid in running}
    placing = [by_key.get(key, Assignment(key)) for key in sorted(keys)]
    plan = rebalance(workers, placing)
    result = dict(plan.assignments)
    removed: list[InstanceKey] = []
    for item in current:
        if item.instance in keys:
            continue
        if item.instance.control_id not in known:
            removed.append(item.instance)
        elif item.worker_id is not None:  # stopped: nobody runs it now
            result[item.instance] = replace(
                item, worker_id=None, epoch=item.epoch + 1, previous=None
            )
        else:
            result[item.instance] = item
    written = Plan(result, plan.moved, plan.placed)
    changes = write_plan(store, current, written, term=term, removed=removed)
    live = {w.worker_id for w in workers}
    for key in sorted(keys):  # a departed worker's run no live worker has room for
        left = by_key[key].worker_id if key in by_key else None
        if left is not None and left not in live and result[key].worker_id is None:
            try:
                wait_for_room(store, key.control_id, left=left)
            except Exception:  # said; its status shows what its worker left meanwhile
                log.exception("leader: %s's record could not say it waits", key.control_id)
    if changes:
        log.info(
            "leader (term %d): %d assignment change(s) over %d worker(s): %d moved, %d placed",
            term, changes, len(workers), plan.moved, plan.placed,
        )  # fmt: skip
    return written


class LeaderLoop:
    """The thread that plans the assignment while ``member`` leads (see the module docstring)."""

    def __init__(self, store: Store, member: Membership, wanted: Wanted) -> None:
        self.store = store
        self.member = member
        self.wanted = wanted
        self.interval = member.lease / 3
        self.rounds = 0  # rounds this worker planned as the leader
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._round_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the loop's thread."""
        self._thread = threading.Thread(
            target=self._loop, name=f"sparkfn-leader-{self.member.worker_id}", daemon=True
        )
        self._thread.start()

    def wake(self) -> None:
        """Plan now rather than at the next round (this worker became the leader, a
        function was created or stopped)."""
        self._wake.set()

    def close(self) -> None:
        """Stop the loop (idempotent)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval * 3)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.round()

    def round(self) -> None:
        """One round, if this worker leads; a failure is logged (the next round tries again)."""
        member = self.member
        if not member.is_leader or member.state is not MemberState.MEMBER:
            return
        with self._round_lock:
            try:
                plan_round(self.store, self.wanted, term=member.term)
                self.rounds += 1
            except StaleLeaderError as exc:
                log.warning("worker %s: %s", member.worker_id, exc)
            except Exception:  # the store failed: the next round tries again
                log.exception("worker %s: the leader's round failed", member.worker_id)
