"""The plans of many subscriptions at once: a query group's reader, every batch.

:func:`~sparkfn.topics.subscription.plan_batch` takes about six statements
and a savepoint per subscription (its owner, its last plan, its cursors,
its partitions' offsets, the plan's write); a group of two hundred members
spent most of its driver's planning there, every batch. :func:`plan_batches`
makes the same plan for every subscription in its steady state in four
statements whatever their number, in the caller's transaction: the owners,
the last plans and the cursors read together, the plans written together.

A subscription in its steady state: the run planning it owns it already,
its last plan is no newer run's, it has a cursor on every partition it
reads, and its guarantee is not at-most-once (whose plan moves the cursors).
Every other one (its first plan, a claim to make or refuse, a new
partition, a newer run's plan) is left to the caller's
:func:`~sparkfn.topics.subscription.plan_batch`, which decides it as before.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, select, update

from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.subscription import PartitionKey, Plan, Span

_cursors = schema.subscriptions
_plans = schema.subscription_plans
_owners = schema.subscription_owners


@dataclass(frozen=True)
class PlanRequest:
    """What :func:`~sparkfn.topics.subscription.plan_batch` is asked for one subscription."""

    name: str
    topics: Sequence[TopicInfo]
    epoch: int
    owner: str
    ends: dict[PartitionKey, int]
    ack_on_plan: bool = False


_WRITE = (
    update(_plans)
    .where(_plans.c.name == bindparam("b_name"))
    .values(
        epoch=bindparam("epoch"),
        spark_start=bindparam("spark_start"),
        spark_end=bindparam("spark_end"),
        spans=bindparam("spans"),
        acked=False,
        committed=False,
        planned_at=bindparam("planned_at"),
    )
)


def plan_batches(
    conn: Connection, requests: Sequence[PlanRequest], *, spark_start: str, spark_end: str
) -> dict[str, Plan]:
    """The plans of the batch ``(spark_start, spark_end)`` of every request in its steady
    state (see the module docstring), each what ``plan_batch`` would have made; a request
    missing from the answer is the caller's to plan one by one.

    The owner rows are locked first (on PostgreSQL, in name order), as ``plan_batch``'s
    claim does, so a plan and a commit of the same subscription take its locks alike.
    """
    shared = Counter(r.name for r in requests)  # two runs on one: one by one, refused there
    wanted = {r.name: r for r in requests if not r.ack_on_plan and shared[r.name] == 1}
    names = sorted(wanted)
    if not names:
        return {}
    owners_query = select(_owners.c.name, _owners.c.owner).where(_owners.c.name.in_(names))
    if conn.dialect.name == "postgresql":
        owners_query = owners_query.order_by(_owners.c.name).with_for_update()
    holders = {r.name: r.owner for r in conn.execute(owners_query)}
    last = {r.name: r for r in conn.execute(select(_plans).where(_plans.c.name.in_(names)))}
    current: dict[str, dict[PartitionKey, int]] = {}
    cursors_query = select(
        _cursors.c.name, _cursors.c.topic_id, _cursors.c.partition, _cursors.c.cursor
    ).where(_cursors.c.name.in_(names))
    for r in conn.execute(cursors_query):
        current.setdefault(r.name, {})[(r.topic_id, r.partition)] = r.cursor
    out: dict[str, Plan] = {}
    writes: list[dict[str, object]] = []
    now = utc_now()
    for name in names:
        request, found, at = wanted[name], last.get(name), current.get(name, {})
        if holders.get(name) != request.owner or found is None or found.epoch > request.epoch:
            continue  # a claim to make or refuse, a first plan, a newer run: one by one
        if any((t.id, p) not in at for t in request.topics for p in range(t.partitions)):
            continue  # a partition without a cursor yet: its cursor is made one by one
        if (
            not found.committed
            and found.epoch == request.epoch
            and (found.spark_start, found.spark_end) == (spark_start, spark_end)
        ):
            spans = tuple(Span(*s) for s in json.loads(found.spans))
            out[name] = Plan(found.epoch, spark_start, spark_end, spans, found.acked, False)
            continue  # the same batch planned again before it committed: the same plan
        ends = request.ends
        spans = tuple(
            Span(tid, part, cursor, max(cursor, ends.get((tid, part), cursor)))
            for (tid, part), cursor in sorted(at.items())
            if (tid, part) in ends
        )
        out[name] = Plan(request.epoch, spark_start, spark_end, spans, False, False)
        writes.append(
            {
                "b_name": name,
                "epoch": request.epoch,
                "spark_start": spark_start,
                "spark_end": spark_end,
                "spans": json.dumps([[s.topic_id, s.partition, s.start, s.end] for s in spans]),
                "planned_at": now,
            }
        )
    if writes:
        conn.execute(_WRITE, writes)
    return out
