"""A subscription's batches: planned on the driver, committed in the sink's transaction.

:func:`plan_batch` records what a micro-batch reads of each partition (from
the cursors on) with the run's epoch; :func:`commit_plan` (one subscription)
and :func:`commit_plans` (a query group's, set-based) move the cursors from
the plan's starts to its ends only if they are still at the starts, in the
transaction that commits the batch's outputs and state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, and_, bindparam, insert, select, update

from sparkfn.api.errors import StaleRunError, SubscriptionInUseError
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.subscription.owners import claim, in_use_error, owner_of, reader_owner
from sparkfn.topics.subscription.positions import (
    PartitionKey,
    Position,
    cursors,
    ensure,
)

_cursors = schema.subscriptions
_plans = schema.subscription_plans
_owners = schema.subscription_owners


@dataclass(frozen=True)
class Span:
    """``[start, end)`` of one topic partition, read by one batch."""

    topic_id: int
    partition: int
    start: int
    end: int

    @property
    def key(self) -> PartitionKey:
        """The partition this span reads."""
        return (self.topic_id, self.partition)


@dataclass(frozen=True)
class Plan:
    """The batch a run's source planned last for a subscription."""

    epoch: int
    spark_start: str  # Spark's offsets for the batch, as JSON: identifies it within a run
    spark_end: str
    spans: tuple[Span, ...]
    acked: bool  # at-most-once: the cursors moved when the batch was planned
    committed: bool


def _move(conn: Connection, name: str, spans: Iterable[Span]) -> None:
    now = utc_now()
    for span in spans:
        if span.end == span.start:
            continue
        conn.execute(
            update(_cursors)
            .where(
                and_(
                    _cursors.c.name == name,
                    _cursors.c.topic_id == span.topic_id,
                    _cursors.c.partition == span.partition,
                )
            )
            .values(cursor=span.end, updated_at=now)
        )


def read_plan(conn: Connection, name: str) -> Plan | None:
    """The last batch planned for ``name``, or None."""
    row = conn.execute(select(_plans).where(_plans.c.name == name)).first()
    if row is None:
        return None
    spans = tuple(Span(*s) for s in json.loads(row.spans))
    return Plan(row.epoch, row.spark_start, row.spark_end, spans, row.acked, row.committed)


def plan_batch(
    conn: Connection,
    name: str,
    topics: Sequence[TopicInfo],
    position: Position,
    *,
    epoch: int,
    spark_start: str,
    spark_end: str,
    ends: dict[PartitionKey, int],
    ack_on_plan: bool = False,
    owner: str | None = None,
) -> Plan:
    """Record what the batch ``(spark_start, spark_end)`` of run ``epoch`` of ``owner`` reads.

    ``owner`` is the run's control id (None: a plain reader, see
    :func:`reader_owner`). The first plan claims the subscription for it; a
    plan by another owner is refused (:class:`SubscriptionInUseError`)
    before anything moves. Each partition is read from its cursor up to
    ``ends`` (nothing where the cursor is already there or past it). Called
    again for the same batch of the same run before it committed, it returns
    the plan made the first time. A run older than the one that planned last
    is refused (:class:`StaleRunError`).
    """
    claim(conn, name, owner if owner is not None else reader_owner(name))
    found = read_plan(conn, name)
    if found is not None and found.epoch > epoch:
        msg = (
            f"subscription {name}: a newer run (epoch {found.epoch}) reads it; "
            f"this run (epoch {epoch}) stops"
        )
        raise StaleRunError(msg)
    if (
        found is not None
        and not found.committed
        and (found.epoch, found.spark_start, found.spark_end) == (epoch, spark_start, spark_end)
    ):
        return found
    current = ensure(conn, name, topics, position)
    spans = tuple(
        Span(tid, part, cursor, max(cursor, ends.get((tid, part), cursor)))
        for (tid, part), cursor in sorted(current.items())
        if (tid, part) in ends
    )
    if ack_on_plan:
        _move(conn, name, spans)
    values = {
        "epoch": epoch,
        "spark_start": spark_start,
        "spark_end": spark_end,
        "spans": json.dumps([[s.topic_id, s.partition, s.start, s.end] for s in spans]),
        "acked": ack_on_plan,
        "committed": False,
        "planned_at": utc_now(),
    }
    if found is None:
        conn.execute(insert(_plans).values(name=name, **values))
    else:
        conn.execute(update(_plans).where(_plans.c.name == name).values(**values))
    return Plan(epoch, spark_start, spark_end, spans, ack_on_plan, False)


def commit_plans(
    conn: Connection, wanted: dict[str, tuple[int, str]]
) -> dict[str, Plan | None | SubscriptionInUseError]:
    """:func:`commit_plan` of many subscriptions (``{name: (epoch, owner)}``) in a few statements.

    A query group's commit, for all its members at once. Each answer is what
    :func:`commit_plan` would give that subscription: its plan (committed,
    its cursors moved), ``None`` (discard the batch) or the refusal it would
    raise, returned instead (the caller decides for that subscription alone).
    The owner rows, then the cursor rows, are locked in name order.
    """
    names = sorted(wanted)
    if not names:
        return {}
    owners_query = select(_owners.c.name, _owners.c.owner).where(_owners.c.name.in_(names))
    cursors_query = (
        select(_cursors.c.name, _cursors.c.topic_id, _cursors.c.partition, _cursors.c.cursor)
        .where(_cursors.c.name.in_(names))
        .order_by(_cursors.c.name, _cursors.c.topic_id, _cursors.c.partition)
    )
    if conn.dialect.name == "postgresql":
        owners_query = owners_query.order_by(_owners.c.name).with_for_update()
        cursors_query = cursors_query.with_for_update()
    holders = {r.name: r.owner for r in conn.execute(owners_query)}
    current: dict[str, dict[PartitionKey, int]] = {}
    for r in conn.execute(cursors_query):
        current.setdefault(r.name, {})[(r.topic_id, r.partition)] = r.cursor
    plans = {
        r.name: Plan(
            r.epoch,
            r.spark_start,
            r.spark_end,
            tuple(Span(*x) for x in json.loads(r.spans)),
            r.acked,
            r.committed,
        )
        for r in conn.execute(select(_plans).where(_plans.c.name.in_(names)))
    }
    answers: dict[str, Plan | None | SubscriptionInUseError] = {}
    moves: list[dict[str, object]] = []
    now = utc_now()
    for name in names:
        epoch, owner = wanted[name]
        holder, plan, at = holders.get(name), plans.get(name), current.get(name, {})
        if holder is not None and holder != owner:
            answers[name] = in_use_error(name, holder, owner)
        elif holder is None or plan is None or plan.epoch != epoch or plan.committed:
            answers[name] = None
        elif not plan.acked and any(at.get(s.key) != s.start for s in plan.spans):
            answers[name] = None
        else:
            answers[name] = plan
            if not plan.acked:
                moves += [
                    {"n": name, "t": s.topic_id, "p": s.partition, "c": s.end, "at": now}
                    for s in plan.spans
                    if s.end != s.start
                ]
    if moves:
        conn.execute(
            update(_cursors)
            .where(
                and_(
                    _cursors.c.name == bindparam("n"),
                    _cursors.c.topic_id == bindparam("t"),
                    _cursors.c.partition == bindparam("p"),
                )
            )
            .values(cursor=bindparam("c"), updated_at=bindparam("at")),
            moves,
        )
    done = [name for name, answer in answers.items() if isinstance(answer, Plan)]
    if done:
        conn.execute(update(_plans).where(_plans.c.name.in_(done)).values(committed=True))
    return answers


def commit_plan(
    conn: Connection, name: str, epoch: int, *, owner: str | None = None
) -> Plan | None:
    """Inside a sink's transaction: advance ``name`` past the batch run ``epoch`` planned.

    Returns the plan when the batch should commit; ``None`` when it must be
    discarded: it was committed already, or the cursors are no longer where
    the batch started (a replay, or another run moved them), so committing
    would duplicate. The cursor rows are locked before the plan is read, so
    two transactions can never both move a cursor from the same start. With ``owner`` (the
    run's control id), a commit of a run that does not own the subscription
    is refused: :class:`SubscriptionInUseError` if another owner has it,
    ``None`` if nobody has (it was deleted since the plan).
    """
    if owner is not None:
        # The claim is locked before the cursors, as a plan locks them.
        holder = owner_of(conn, name, lock=True)
        if holder is None:
            return None
        if holder != owner:
            raise in_use_error(name, holder, owner)
    current = cursors(conn, name, lock=True)
    plan = read_plan(conn, name)
    if plan is None or plan.epoch != epoch or plan.committed:
        return None
    if not plan.acked and any(current.get(s.key) != s.start for s in plan.spans):
        return None
    if not plan.acked:
        _move(conn, name, plan.spans)
    conn.execute(update(_plans).where(_plans.c.name == name).values(committed=True))
    return plan
