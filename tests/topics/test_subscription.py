"""The subscription cursor, on both stores, without Spark: plan, commit, replay."""

from __future__ import annotations

import pytest

from sparkfn.api.errors import StaleRunError
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.plans import PlanRequest, plan_batches
from sparkfn.topics.producer import Producer
from sparkfn.topics.subscription import Plan, Span

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


def test_plans_of_many_make_plan_batch_s_plan_or_leave_it_to_it(store: Store) -> None:
    """A query group's set-based plan: in the steady state the plan plan_batch makes;
    a first plan, another owner, a newer run, at-most-once, a new partition: not made."""
    admin = TopicAdmin(store)
    topics = {n: admin.create(n, partitions=2) for n in ("a", "b", "c")}
    for n in topics:
        Producer(store, n).send_batch([Message(b"x")] * 4, partition=0)

    def request(n: str, epoch: int = 1, *, ack: bool = False, owner: str = "") -> PlanRequest:
        tid = topics[n].id
        return PlanRequest(f"s-{n}", [topics[n]], epoch, owner or f"run-{n}", {(tid, 0): 3}, ack)

    with store.write() as conn:
        assert plan_batches(conn, [request("a")], spark_start="0", spark_end="1") == {}
        for n in ("a", "b", "c"):  # first plans: claims and cursors, one by one
            subscription.plan_batch(
                conn,
                f"s-{n}",
                [topics[n]],
                "earliest",
                epoch=1,
                spark_start="0",
                spark_end="1",
                ends={(topics[n].id, 0): 2},
                owner=f"run-{n}",
            )
        subscription.commit_plans(conn, {f"s-{n}": (1, f"run-{n}") for n in topics})
    asked = [request("a"), request("b", ack=True), request("c", owner="someone")]
    with store.write() as conn:
        made = plan_batches(conn, asked, spark_start="1", spark_end="2")
        assert set(made) == {"s-a"}
        expected = Plan(1, "1", "2", (Span(topics["a"].id, 0, 2, 3),), False, False)
        assert made["s-a"] == expected
        assert subscription.read_plan(conn, "s-a") == expected
        # The same batch again before its commit: the same plan; a newer run's plan is
        # plan_batch's to refuse to an older one.
        assert plan_batches(conn, [request("a")], spark_start="1", spark_end="2") == made
        subscription.plan_batch(
            conn,
            "s-a",
            [topics["a"]],
            "earliest",
            epoch=2,
            spark_start="1",
            spark_end="2",
            ends={},
            owner="run-a",
        )
        assert plan_batches(conn, [request("a")], spark_start="2", spark_end="3") == {}
    admin.create("d", partitions=1)
    with store.write() as conn:  # a topic without a cursor yet: plan_batch makes it
        grown = PlanRequest("s-b", [topics["b"], admin.get("d")], 1, "run-b", {})
        assert plan_batches(conn, [grown], spark_start="1", spark_end="2") == {}
