"""The subscription cursor, on both stores, without Spark: plan, commit, replay."""

from __future__ import annotations

import pytest

from sparkfn.api.errors import StaleRunError
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.subscription import Plan

NAME = "public/default/f"


def _setup(store: Store, count: int = 10) -> int:
    topic = TopicAdmin(store).create("in", partitions=1)
    Producer(store, "in").send_batch([Message(b"x")] * count, partition=0)
    return topic.id


def _plan(
    store: Store, tid: int, end: int, *, epoch: int = 1, batch: str = "b", ack: bool = False
) -> Plan:
    topics = [TopicAdmin(store).get("in")]
    with store.write() as conn:
        return subscription.plan_batch(
            conn,
            NAME,
            topics,
            "earliest",
            epoch=epoch,
            spark_start=batch,
            spark_end=batch,
            ends={(tid, 0): end},
            ack_on_plan=ack,
        )


def _commit(store: Store, epoch: int = 1) -> bool:
    with store.write() as conn:
        return subscription.commit_plan(conn, NAME, epoch) is not None


def _cursor(store: Store, tid: int) -> int:
    with store.read() as conn:
        return subscription.cursors(conn, NAME)[(tid, 0)]


def test_position_applies_only_when_the_subscription_is_new(store: Store) -> None:
    tid = _setup(store)
    topics = [TopicAdmin(store).get("in")]
    with store.write() as conn:
        assert subscription.ensure(conn, NAME, topics, "latest") == {(tid, 0): 10}
    with store.write() as conn:
        assert subscription.ensure(conn, NAME, topics, "earliest") == {(tid, 0): 10}
        assert subscription.delete_subscription(conn, NAME) == 1
    with store.write() as conn:
        assert subscription.ensure(conn, NAME, topics, "earliest") == {(tid, 0): 0}


def test_a_batch_moves_the_cursor_once(store: Store) -> None:
    tid = _setup(store)
    plan = _plan(store, tid, 4)
    assert [(s.start, s.end) for s in plan.spans] == [(0, 4)]
    assert _plan(store, tid, 4) == plan  # planned again in the same run: the same plan
    assert _commit(store)
    assert _cursor(store, tid) == 4
    assert not _commit(store)  # committed already
    # A replay (Spark's offsets from an older checkpoint) starts at the cursor: nothing to read.
    replay = _plan(store, tid, 4, epoch=2, batch="old")
    assert [(s.start, s.end) for s in replay.spans] == [(4, 4)]
    assert _commit(store, epoch=2)
    assert _cursor(store, tid) == 4


def test_a_commit_whose_start_the_cursor_left_is_refused(store: Store) -> None:
    tid = _setup(store)
    _plan(store, tid, 6, epoch=1)
    with store.write() as conn:  # someone else moved the cursor (another run, an operator)
        subscription.ensure(conn, NAME, [TopicAdmin(store).get("in")], "earliest")
        conn.execute(schema.subscriptions.update().values(cursor=3))
    assert not _commit(store, epoch=1)
    assert _cursor(store, tid) == 3
    assert not _commit(store, epoch=7)  # not this epoch's plan


def test_ack_on_plan_moves_the_cursor_before_processing(store: Store) -> None:
    tid = _setup(store)
    _plan(store, tid, 5, ack=True)
    assert _cursor(store, tid) == 5  # a failed batch will not be read again
    assert _commit(store)
    assert _cursor(store, tid) == 5


def test_a_run_older_than_the_last_planner_is_refused(store: Store) -> None:
    tid = _setup(store)
    _plan(store, tid, 4, epoch=3)
    with pytest.raises(StaleRunError, match=r"a newer run \(epoch 3\)"):
        _plan(store, tid, 4, epoch=2, batch="stale")
