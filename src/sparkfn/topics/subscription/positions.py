"""A subscription's cursors: the next offset to deliver of each topic partition it reads.

Creating them at a position (:func:`ensure`), reading them, moving one past a
dead-lettered message (:func:`skip`), and removing them (Pulsar's
:func:`unsubscribe`, or the whole subscription: :func:`delete_subscription`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from sqlalchemy import Connection, and_, delete, insert, select, update

from sparkfn.api.errors import SubscriptionBusyError, SubscriptionNotFoundError
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.log import end_offsets
from sparkfn.topics.subscription.owners import describe_owner, owner_of, release

Position = Literal["earliest", "latest"]
PartitionKey = tuple[int, int]  # (topic id, partition)

_cursors = schema.subscriptions
_plans = schema.subscription_plans


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
