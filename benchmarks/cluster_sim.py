"""The cluster at scale, without Spark: assignment and failover of 10,000 instances over
10-200 workers, and what the membership and the assignment cost one PostgreSQL store.

::

    .venv/bin/python benchmarks/cluster_sim.py
    .venv/bin/python benchmarks/cluster_sim.py --instances 10000 --workers 10,50,200 --seconds 5

Two parts:

1. **Assignment** (pure, :func:`sparkfn.worker.cluster.assignment.rebalance`):
   for each cluster size, the time of the first placement, of a rebalance
   after one worker joins and after one leaves, and the instances each moved
   against the fewest possible (the new worker's share; the leaver's
   instances): a ratio of 1.00 is minimal.
2. **The store** (a fresh schema of a real PostgreSQL, dropped afterwards):
   the heartbeats and assignment reads one store serves per second (every
   worker does one of each per round, every ``lease / 3`` s), counted in
   statements; the leader's round at full size (heartbeat, live workers, the
   whole assignment read, a rebalance, the write of a failover); from those,
   the cluster size at which the store is saturated for a given lease.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event

sys.path.insert(0, str(Path(__file__).parent))
from _common import bench_store, load_average  # noqa: E402

from sparkfn.store.store import Store  # noqa: E402
from sparkfn.worker.cluster.assignment import Assignment, InstanceKey, Plan, Worker, rebalance  # noqa: E402
from sparkfn.worker.cluster.assignment_store import read_assignments, write_plan  # noqa: E402
from sparkfn.worker.cluster.leader_lock import record_leader  # noqa: E402
from sparkfn.worker.cluster.members import live_workers  # noqa: E402
from sparkfn.worker.cluster.membership import Beat, Membership  # noqa: E402

PG = "postgresql://postgres@127.0.0.1:5432/test"


def instances(count: int) -> list[Assignment]:
    """``count`` single-instance functions."""
    return [Assignment(InstanceKey(f"tenant/ns/fn-{i:05d}", 0)) for i in range(count)]


def workers(count: int, total: int, headroom: float = 1.25) -> list[Worker]:
    """``count`` workers whose capacities hold ``total`` instances with ``headroom``."""
    capacity = int(total * headroom / count) + 1
    return [Worker(f"worker-{i:03d}", capacity) for i in range(count)]


def timed(call: Callable[[], Plan]) -> tuple[Plan, float]:
    started = time.perf_counter()
    plan = call()
    return plan, time.perf_counter() - started


def assignment_part(sizes: list[int], total: int, repeats: int) -> None:
    print(f"\n== assignment of {total:,} instances (median of {repeats}) ==")
    print(
        f"{'workers':>7} {'place s':>8} {'join s':>7} {'moved':>6} {'fewest':>6} {'ratio':>5} "
        f"{'leave s':>7} {'moved':>6} {'fewest':>6} {'ratio':>5} {'max-min load':>12}"
    )
    for size in sizes:
        rows: list[tuple[float, ...]] = []
        for _ in range(repeats):
            cluster = workers(size, total)
            first, place_s = timed(lambda c=cluster: rebalance(c, instances(total)))
            joined = [*cluster, Worker("worker-new", cluster[0].capacity)]
            join, join_s = timed(lambda j=joined, f=first: rebalance(j, f.assignments.values()))
            join_fewest = join.loads().get("worker-new", 0)
            gone = cluster[size // 2]
            stay = [w for w in cluster if w is not gone]
            leave, leave_s = timed(lambda s=stay, f=first: rebalance(s, f.assignments.values()))
            leave_fewest = first.loads()[gone.worker_id]
            loads = leave.loads().values()
            rows.append(
                (place_s, join_s, join.moved, join_fewest, leave_s, leave.moved, leave_fewest,
                 max(loads) - min(loads))
            )  # fmt: skip
        m = [statistics.median(column) for column in zip(*rows, strict=True)]
        print(
            f"{size:>7} {m[0]:>8.3f} {m[1]:>7.3f} {m[2]:>6.0f} {m[3]:>6.0f} {m[2] / m[3]:>5.2f} "
            f"{m[4]:>7.3f} {m[5]:>6.0f} {m[6]:>6.0f} {m[5] / m[6]:>5.2f} {m[7]:>12.0f}"
        )


class Statements:
    """Counts the statements sent to a store's engine (an executemany counts once)."""

    def __init__(self, store: Store) -> None:
        self.count = 0
        self._lock = threading.Lock()
        event.listen(store.engine, "before_cursor_execute", self._seen)

    def _seen(self, *_: Any) -> None:
        with self._lock:
            self.count += 1


def hammer(calls: list[Callable[[], object]], threads: int, seconds: float) -> int:
    """Run ``calls`` round-robin from ``threads`` threads for ``seconds``; returns calls done."""
    done = [0] * threads
    end = time.monotonic() + seconds

    def loop(index: int) -> None:
        position = index
        while time.monotonic() < end:
            calls[position % len(calls)]()
            position += threads
            done[index] += 1

    pool = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(done)


def store_part(store: Store, members_count: int, total: int, seconds: float, threads: int,
               leases: list[float]) -> None:  # fmt: skip
    counter = Statements(store)
    print(f"\n== the store: {members_count} members, {total:,} assignments, {threads} threads ==")
    members = [Membership(store, f"worker-{i:03d}", host="10.0.0.1", port=6750 + i, lease=3600)
               for i in range(members_count)]  # fmt: skip
    for member in members:
        member.join()
    term = record_leader(store, members[0].worker_id)
    cluster = [Worker(m.worker_id, int(total * 1.25 / members_count) + 1) for m in members]
    first = rebalance(cluster, instances(total))
    started = time.perf_counter()
    write_plan(store, instances(total), first, term=term)
    print(f"first placement written: {total:,} rows in {time.perf_counter() - started:.2f} s")

    def beat(member: Membership) -> Callable[[], object]:
        def call() -> object:
            if member.heartbeat() is not Beat.WRITTEN:
                print(f"!!! {member.worker_id}: heartbeat not written")
            return None

        return call

    def poll(member: Membership) -> Callable[[], object]:
        return lambda: read_assignments(store, member.worker_id)

    figures: dict[str, tuple[float, float]] = {}
    for name, calls in (("heartbeat", [beat(m) for m in members]),
                        ("assignment read", [poll(m) for m in members])):  # fmt: skip
        before = counter.count
        done = hammer(calls, threads, seconds)
        figures[name] = (done / seconds, (counter.count - before) / seconds)
        print(f"{name:>16}: {done / seconds:8.0f}/s, {figures[name][1]:8.0f} statements/s")

    # The leader's round at full size: its heartbeat, the live workers, the whole
    # assignment, a rebalance after one worker left, the write of what moved.
    before, started = counter.count, time.perf_counter()
    members[0].heartbeat()
    live = live_workers(store)
    current = read_assignments(store)
    gone = cluster[len(cluster) // 2].worker_id
    plan = rebalance([w for w in cluster if w.worker_id != gone], current)
    written = write_plan(store, current, plan, term=term)
    leader_s = time.perf_counter() - started
    leader_statements = counter.count - before
    print(
        f"leader's failover round: {leader_s:.2f} s, {leader_statements} statements "
        f"({len(live)} live workers read, {len(current):,} assignments read, {written} rows written)"
    )
    quiet_before, started = counter.count, time.perf_counter()
    members[0].heartbeat()
    live_workers(store)
    current = read_assignments(store)
    rebalance([w for w in cluster if w.worker_id != gone], current)
    quiet_s = time.perf_counter() - started
    quiet_statements = counter.count - quiet_before
    print(f"leader's quiet round (nothing changed): {quiet_s:.2f} s, {quiet_statements} statements")

    # A round of every worker: one heartbeat and one assignment read.
    per_round_s = 1 / figures["heartbeat"][0] + 1 / figures["assignment read"][0]
    rounds_per_s = 1 / per_round_s
    print(
        "\nwhere one store saturates (every worker beats and reads its assignment every lease/3):"
    )
    print(f"{'lease s':>7} {'rounds/s per worker':>19} {'workers at saturation':>22} "
          f"{'statements/s at 200 workers':>28} {'failover s (lease + round + leader)':>36}")  # fmt: skip
    for lease in leases:
        per_worker = 3 / lease
        saturation = rounds_per_s / per_worker
        demand_200 = 200 * per_worker * (
            (figures["heartbeat"][1] / figures["heartbeat"][0])
            + (figures["assignment read"][1] / figures["assignment read"][0])
        ) + quiet_statements * per_worker  # fmt: skip
        failover = lease + lease / 3 + leader_s
        print(f"{lease:>7.0f} {per_worker:>19.2f} {saturation:>22.0f} {demand_200:>28.0f} "
              f"{failover:>36.1f}")  # fmt: skip
    print(
        f"(the leader's quiet round alone reads all {len(current):,} assignments: "
        f"{quiet_s:.2f} s each lease/3)"
    )
    for member in members:
        member.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument(
        "--workers", default="10,25,50,100,200", help="cluster sizes, comma-separated"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--store-url", default=PG, help="a PostgreSQL server (a schema is made)")
    parser.add_argument("--members", type=int, default=200, help="members of the store part")
    parser.add_argument("--seconds", type=float, default=5.0, help="each throughput measurement")
    parser.add_argument("--threads", type=int, default=4, help="concurrent workers' calls")
    parser.add_argument("--leases", default="5,10,30", help="leases (s) to give figures for")
    args = parser.parse_args()
    print(f"load average at start: {load_average()}")
    sizes = [int(x) for x in args.workers.split(",")]
    assignment_part(sizes, args.instances, args.repeats)
    with (
        tempfile.TemporaryDirectory() as tmp,
        bench_store(args.store_url, Path(tmp)) as (store, what),
    ):
        print(f"\nstore: {what}")
        store_part(store, args.members, args.instances, args.seconds, args.threads,
                   [float(x) for x in args.leases.split(",")])  # fmt: skip
    print(f"\nload average at end: {load_average()}")


if __name__ == "__main__":
    main()
