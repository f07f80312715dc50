"""Subscriptions: a named cursor per topic partition, the position of record.

As in Pulsar, a subscription outlives any one consumer: a function's
position in its inputs is its subscription (named ``tenant/ns/name`` unless
``subscription_name`` says otherwise), kept in the store, never in Spark's
checkpoint. A cursor is the next offset to deliver.

A streaming query reads a subscription in two steps, both on the driver:

1. **plan** (:func:`plan_batch`, when the source splits a micro-batch into
   tasks): the batch reads ``[cursor, end)`` of each partition, whatever
   offsets Spark's checkpoint holds, so a new or lost checkpoint resumes
   exactly where the last commit left off. The plan is recorded with the
   run's epoch; planning the same Spark batch again in the same run gives
   the same plan. ``ack_on_plan`` (at-most-once) moves the cursors past the
   batch right away, so a batch that fails is never read again.
2. **commit** (:func:`commit_plan`, inside the sink's transaction): the
   cursors move from the plan's starts to its ends only if they are still
   at the starts; otherwise the batch was committed already (a replay after
   a crash, or another run got there first) and the caller discards it.
   Because the sink's outputs, state and the cursor move share one
   transaction, every input's effects land exactly once.

A subscription has **one owner**, because its plan is one row: two queries
planning it in turn would each overwrite the other's plan, and a commit
would move the cursors by a plan that is not its batch's (messages lost
without a trace). The owner is the run's control id (a function's FQFN, a
sink's ``sink:<fqfn>``: the reader's ``controlId`` option); every plain
reader (no ``controlId``) of a subscription shares the owner
:func:`reader_owner`. The first plan claims the subscription in its own
transaction (:func:`claim`); a plan by another owner is refused with
:class:`~sparkfn.api.errors.SubscriptionInUseError` before anything
moves, and so is a commit that names another owner. Epochs then fence the
runs of the one owner as before. :func:`delete_subscription` and
:func:`release` free the subscription for another owner; :func:`unsubscribe`
(Pulsar's) removes it from one topic.

>>> with store.write() as conn:
...     ensure(conn, "public/default/wc", [topic], "earliest")
{(3, 0): 0}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Connection, and_, bindparam, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from sparkfn.api.errors import (
    StaleRunError,
    SubscriptionBusyError,
    SubscriptionInUseError,
    SubscriptionNotFoundError,
)
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.log import end_offsets

Position = Literal["earliest", "latest"]
PartitionKey = tuple[int, int]  # (topic id, partition)

_cursors = schema.subscriptions
_plans = schema.subscription_plans
_owners = schema.subscription_owners

# The owner of a subscription read by a query with no controlId: reader:<name>.
READER_OWNER_PREFIX = "reader:"


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


def cursors(conn: Connection, name: str, *, lock: bool = False) -> dict[PartitionKey, int]:
    """Every cursor of subscription ``name`` (``lock``: for update, on PostgreSQL)."""
    query = (
        select(_cursors.c.topic_id, _cursors.c.partition, _cursors.c.cursor)
        .where(_cursors.c.name == name)
        .order_by(_cursors.c.topic_id, _cursors.c.partition)
    )
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return {(r.topic_id, r.partition): r.cursor for r in conn.execute(query)}


def cursors_of(conn: Connection, names: Iterable[str]) -> dict[str, dict[PartitionKey, int]]:
    """The cursors of many subscriptions in one query (a query group's reader)."""
    wanted = list(names)
    found: dict[str, dict[PartitionKey, int]] = {}
    if not wanted:
        return found
    query = select(_cursors.c.name, _cursors.c.topic_id, _cursors.c.partition, _cursors.c.cursor)
    for r in conn.execute(query.where(_cursors.c.name.in_(wanted))):
        found.setdefault(r.name, {})[(r.topic_id, r.partition)] = r.cursor
    return found


def ensure(
    conn: Connection, name: str, topics: Iterable[TopicInfo], position: Position
) -> dict[PartitionKey, int]:
    """The cursors of ``name`` on ``topics``, creating the missing ones at ``position``.

    ``position`` applies only to partitions the subscription has no cursor
    for yet: an existing subscription resumes where it is.
    """
    found = cursors(conn, name)
    missing = []
    for topic in topics:
        for part, (first, end) in sorted(end_offsets(conn, topic).items()):
            if (topic.id, part) in found:
                continue
            cursor = first if position == "earliest" else end
            found[(topic.id, part)] = cursor
            missing.append(
                {
                    "topic_id": topic.id,
                    "name": name,
                    "partition": part,
                    "cursor": cursor,
                    "updated_at": utc_now(),
                }
            )
    if missing:
        conn.execute(insert(_cursors), missing)
    return found


def adopt(conn: Connection, name: str, topics: Iterable[TopicInfo]) -> None:
    """Cursors for ``name`` at the first message of ``topics`` it has none on, if it exists.

    Topics a subscription gains after it began (a ``topics_pattern`` that
    matches more) hold only messages produced since, so none may be
    skipped, whatever its position said; a new subscription starts where
    its position says (:func:`ensure`, at its first plan).
    """
    if cursors(conn, name):
        ensure(conn, name, topics, "earliest")


def delete_subscription(conn: Connection, name: str) -> int:
    """Remove subscription ``name`` (``cleanup_subscription``) and its owner's claim; returns the cursors removed."""
    conn.execute(delete(_plans).where(_plans.c.name == name))
    release(conn, name)
    return int(conn.execute(delete(_cursors).where(_cursors.c.name == name)).rowcount or 0)


# The state of the live run of an owner (a control id), None if it has none: the runtime's to say.
LiveRun = Callable[[Connection, str], str | None]


def unsubscribe(
    conn: Connection, name: str, topic: TopicInfo, *, live_run: LiveRun, force: bool = False
) -> int:
    """Pulsar's unsubscribe: remove subscription ``name`` from ``topic``; returns the cursors removed.

    A subscription may read several topics; its cursors on the others stay.
    Once it has none left anywhere it goes as :func:`delete_subscription`
    removes it, with its plan and its owner's claim. While ``live_run``
    gives the state of its owner's run, the unsubscribe is refused with
    :class:`SubscriptionBusyError`, unless ``force``: the run's batch in
    flight is then discarded (its commit finds the cursors it started from
    gone) and its next plan creates the subscription again at its initial
    position, as a Pulsar consumer does when it reconnects.
    :class:`SubscriptionNotFoundError` if the topic has no such
    subscription. Call it in a write transaction.
    """
    here = and_(_cursors.c.name == name, _cursors.c.topic_id == topic.id)
    owner = owner_of(conn, name, lock=True)  # locked before the cursors, as a commit does
    if conn.execute(select(_cursors.c.name).where(here).limit(1)).first() is None:
        msg = f"topic {topic.name} has no subscription {name!r}"
        raise SubscriptionNotFoundError(msg)
    state = None if owner is None or force else live_run(conn, owner)
    if owner is not None and state is not None:
        msg = (
            f"subscription {name!r} of topic {topic.name} is read by {describe_owner(owner)}, "
            f"which is {state}; stop it first, or force the unsubscribe"
        )
        raise SubscriptionBusyError(msg)
    removed = int(conn.execute(delete(_cursors).where(here)).rowcount or 0)
    left = conn.execute(select(_cursors.c.name).where(_cursors.c.name == name).limit(1)).first()
    if left is None:
        delete_subscription(conn, name)  # its plan and its owner's claim go with its last cursor
    return removed


def reader_owner(name: str) -> str:
    """The owner of subscription ``name`` when a plain reader (no ``controlId``) plans it.

    One owner for every plain reader of the subscription, so they share it as
    they always could: no sparkfn sink commits a plain reader's plan (its
    cursors move only at planning, with ``ackOnPlan``, and each such move is
    one serialized transaction), so their overwriting each other's plan
    loses nothing. A function or a sink is refused it, and it them: a commit
    of theirs would move the cursors by the plain reader's plan.
    """
    return f"{READER_OWNER_PREFIX}{name}"


def describe_owner(owner: str) -> str:
    """``owner`` as a message says it: ``function t/ns/f``, ``sink t/ns/s``, ``a plain reader``."""
    if owner.startswith(READER_OWNER_PREFIX):
        return "a plain sparkfn reader (no controlId)"
    kind, colon, fqfn = owner.partition(":")
    return f"{kind} {fqfn}" if colon else f"function {owner}"


def in_use_error(name: str, holder: str, refused: str) -> SubscriptionInUseError:
    """The refusal of ``refused`` (an owner) on subscription ``name``, which ``holder`` owns."""
    option = (
        "'subscription' option" if refused.startswith(READER_OWNER_PREFIX) else "subscription_name"
    )
    msg = (
        f"subscription {name}: read by {describe_owner(holder)}; {describe_owner(refused)} "
        f"cannot share it (give it another {option})"
    )
    return SubscriptionInUseError(msg)


def owner_of(conn: Connection, name: str, *, lock: bool = False) -> str | None:
    """Who owns subscription ``name`` (a run's control id, or :func:`reader_owner`); None: nobody yet."""
    query = select(_owners.c.owner).where(_owners.c.name == name)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return conn.execute(query).scalar()


def check_free(conn: Connection, name: str, owner: str) -> None:
    """:class:`SubscriptionInUseError` naming both if an owner other than ``owner`` has ``name``.

    A check before a run starts; :func:`claim`, in the plan's transaction, is the guard.
    """
    holder = owner_of(conn, name)
    if holder is not None and holder != owner:
        raise in_use_error(name, holder, owner)


def claim(conn: Connection, name: str, owner: str) -> None:
    """Make ``owner`` the owner of subscription ``name``, unless another owner has it.

    Raises :class:`SubscriptionInUseError` naming both if another has it.
    Called in the transaction of a plan, so the first plan and its claim
    commit together; of two first claims at once, one waits for the other
    (on PostgreSQL the insert waits on the key; SQLite has one writer) and
    then sees it.
    """
    holder = owner_of(conn, name, lock=True)
    if holder is None:
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        conn.execute(
            dialect.insert(_owners)
            .values(name=name, owner=owner, claimed_at=utc_now())
            .on_conflict_do_nothing(index_elements=[_owners.c.name])
        )
        holder = owner_of(conn, name, lock=True)
    if holder is not None and holder != owner:
        raise in_use_error(name, holder, owner)


def release(conn: Connection, name: str, owner: str | None = None) -> bool:
    """Free subscription ``name`` for another owner (only from ``owner``, if given); True if it had one.

    The cursors stay: whoever plans it next claims it and resumes from them.
    """
    condition = _owners.c.name == name
    if owner is not None:
        condition = and_(condition, _owners.c.owner == owner)
    return bool(conn.execute(delete(_owners).where(condition)).rowcount)


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


def skip(conn: Connection, name: str, key: PartitionKey, offset: int) -> bool:
    """Move ``name``'s cursor on ``key`` from ``offset`` to ``offset + 1``, only if it is there.

    One message passed without its batch (it was dead-lettered on its own,
    see :func:`sparkfn.runtime.lifecycle.deadletter.dead_letter_input`); call it in
    that transaction. ``False`` (nothing moved) when the cursor is elsewhere:
    the message was committed or skipped already.
    """
    topic_id, partition = key
    moved = conn.execute(
        update(_cursors)
        .where(
            and_(
                _cursors.c.name == name,
                _cursors.c.topic_id == topic_id,
                _cursors.c.partition == partition,
                _cursors.c.cursor == offset,
            )
        )
        .values(cursor=offset + 1, updated_at=utc_now())
    )
    return bool(moved.rowcount)


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
