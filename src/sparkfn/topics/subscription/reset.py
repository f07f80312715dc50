"""Pulsar's ``reset-cursor`` and ``peek-messages``: a subscription's cursors on a topic
moved back (or on), and the messages after them read without moving them (:func:`peek`).

To a time (:func:`offsets_at`: each partition's first message published at
or after it) or to a message id (``partition:offset``, or ``earliest`` /
``latest`` for every partition); :func:`reset_cursors` sets them. It is
refused (:class:`~sparkfn.api.errors.SubscriptionBusyError`) while a running
function or sink owns the subscription: a run's batch in flight was planned
from the cursors it would move, so the reset waits for a stop, and the next
start reads from the new position.
"""

from __future__ import annotations

from datetime import datetime

import pyarrow.compute as pc
from sqlalchemy import Connection, and_, select, update

from sparkfn.api.errors import (
    ConfigError,
    SubscriptionBusyError,
    SubscriptionNotFoundError,
)
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import end_offsets
from sparkfn.topics.message import ReceivedMessage, messages_from_table
from sparkfn.topics.reading import read_range
from sparkfn.topics.subscription.owners import describe_owner, owner_of
from sparkfn.topics.subscription.positions import LiveRun

_cursors = schema.subscriptions
_segments = schema.segments


def offsets_at(store: Store, topic: TopicInfo, when: datetime) -> dict[int, int]:
    """``{partition: offset}`` of each partition's first message published at or after
    ``when`` (its end when none is); the segments' latest times find the one to read."""
    found: dict[int, int] = {}
    for partition, (start, end) in end_offsets(store, topic).items():
        found[partition] = end
        with store.read() as conn:
            row = conn.execute(
                select(_segments.c.base_offset)
                .where(
                    and_(
                        _segments.c.topic_id == topic.id,
                        _segments.c.partition == partition,
                        _segments.c.max_publish_time >= when,
                        _segments.c.base_offset + _segments.c.count > start,
                    )
                )
                .order_by(_segments.c.base_offset)
                .limit(1)
            ).first()
        if row is None:
            continue
        for batch in read_range(store, topic, partition, max(start, row.base_offset), end):
            times = batch.column(batch.schema.names.index("publish_time"))
            later = pc.indices_nonzero(pc.greater_equal(times, when))
            if len(later):
                offsets = batch.column(batch.schema.names.index("offset"))
                found[partition] = offsets[later[0].as_py()].as_py()
                break
    return found


def offsets_of_id(store: Store, topic: TopicInfo, message_id: str, exclude: bool) -> dict[int, int]:
    """The cursors Pulsar's ``--messageId`` asks for: ``earliest``, ``latest``, or
    ``partition:offset`` (that message delivered next; ``exclude``: the one after it)."""
    ends = end_offsets(store, topic)
    text = message_id.strip().lower()
    if text in ("earliest", "latest"):
        return {p: (start if text == "earliest" else end) for p, (start, end) in ends.items()}
    partition_text, _, offset_text = text.partition(":")
    if not (partition_text.isdigit() and offset_text.isdigit()):
        msg = (
            f"message id {message_id!r} is none of earliest, latest or partition:offset "
            "(as sparkfn prints message ids)"
        )
        raise ConfigError(msg)
    partition, offset = int(partition_text), int(offset_text)
    if partition not in ends:
        msg = f"topic {topic.name} has no partition {partition} (0..{topic.partitions - 1})"
        raise ConfigError(msg)
    return {partition: offset + 1 if exclude else offset}


def reset_cursors(
    conn: Connection, name: str, topic: TopicInfo, offsets: dict[int, int], *, live_run: LiveRun
) -> dict[int, int]:
    """Set subscription ``name``'s cursors on ``topic`` to ``offsets`` (each clamped to
    what its partition holds); returns them. Call it in a write transaction.

    :class:`SubscriptionNotFoundError` if the topic has no such subscription;
    :class:`SubscriptionBusyError` while a live run owns it. The next run plans
    from the new cursors.
    """
    here = and_(_cursors.c.name == name, _cursors.c.topic_id == topic.id)
    owner = owner_of(conn, name, lock=True)  # locked before the cursors, as a commit does
    existing = {r.partition for r in conn.execute(select(_cursors.c.partition).where(here))}
    if not existing:
        msg = f"topic {topic.name} has no subscription {name!r}"
        raise SubscriptionNotFoundError(msg)
    state = None if owner is None else live_run(conn, owner)
    if owner is not None and state is not None:
        msg = (
            f"subscription {name!r} of topic {topic.name} is read by {describe_owner(owner)}, "
            f"which is {state}; stop it first (functions stop), reset the cursor, then start it"
        )
        raise SubscriptionBusyError(msg)
    ends = end_offsets(conn, topic)
    done: dict[int, int] = {}
    for partition, offset in sorted(offsets.items()):
        if partition not in existing or partition not in ends:
            continue
        start, end = ends[partition]
        done[partition] = min(max(offset, start), end)
        conn.execute(
            update(_cursors)
            .where(and_(here, _cursors.c.partition == partition))
            .values(cursor=done[partition], updated_at=utc_now())
        )
    # The last plan (kept: its epoch fences older runs out) is never replayed from the
    # old cursors: it reads as committed.
    plans = schema.subscription_plans
    conn.execute(update(plans).where(plans.c.name == name).values(committed=True))
    return done


def peek(store: Store, topic: TopicInfo, name: str, count: int) -> list[ReceivedMessage]:
    """The next ``count`` messages of subscription ``name`` on ``topic`` (fewer when
    fewer are there), partition by partition, without moving its cursors."""
    cursors = TopicAdmin(store).subscriptions(topic.name).get(name)
    if cursors is None:
        msg = f"topic {topic.name} has no subscription {name!r}"
        raise SubscriptionNotFoundError(msg)
    found: list[ReceivedMessage] = []
    for partition, (start, end) in sorted(end_offsets(store, topic).items()):
        first = max(cursors.get(partition, start), start)
        last = min(end, first + count - len(found))
        if last > first:
            for batch in read_range(store, topic, partition, first, last):
                found.extend(messages_from_table(batch))
        if len(found) >= count:
            break
    return found[:count]
