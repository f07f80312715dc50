"""One owner per subscription, on both stores, without Spark: claim, refusal, fencing, release.

Two queries planning one subscription overwrote each other's plan, and a
commit then moved the cursors by the other's plan: messages were lost
without a trace. The first plan claims the subscription for its run's
control id; any other owner is refused before anything moves.
"""

from __future__ import annotations

import threading

import pytest

from sparkfn.api.errors import ConfigError, StaleRunError, SubscriptionInUseError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.purge import purge_function
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.subscription import Plan

NAME = "public/default/x"
A, B = "a/b/c", "a/b/d"
REFUSED_D = (
    r"subscription public/default/x: read by function a/b/c; function a/b/d cannot share it "
    r"\(give it another subscription_name\)"
)


def _setup(store: Store, count: int = 150) -> int:
    topic = TopicAdmin(store).create("in", partitions=1)
    Producer(store, "in").send_batch([Message(b"x")] * count, partition=0)
    return topic.id


def _plan(
    store: Store,
    owner: str | None,
    end: int,
    *,
    epoch: int = 1,
    batch: str = "b",
    ack: bool = False,
    name: str = NAME,
) -> Plan:
    topic = TopicAdmin(store).get("in")
    with store.write() as conn:
        return subscription.plan_batch(
            conn,
            name,
            [topic],
            "earliest",
            epoch=epoch,
            spark_start=batch,
            spark_end=batch,
            ends={(topic.id, 0): end},
            ack_on_plan=ack,
            owner=owner,
        )


def _commit(store: Store, owner: str | None, epoch: int = 1) -> bool:
    with store.write() as conn:
        return subscription.commit_plan(conn, NAME, epoch, owner=owner) is not None


def _cursor(store: Store, tid: int) -> int:
    with store.read() as conn:
        return subscription.cursors(conn, NAME)[(tid, 0)]


def _owner(store: Store, name: str = NAME) -> str | None:
    with store.read() as conn:
        return subscription.owner_of(conn, name)


def _stored_plan(store: Store) -> Plan | None:
    with store.read() as conn:
        return subscription.read_plan(conn, NAME)


def test_the_first_plan_claims_the_subscription(store: Store) -> None:
    tid = _setup(store)
    assert _owner(store) is None
    _plan(store, A, 100)
    assert _owner(store) == A
    assert _commit(store, A)
    assert _cursor(store, tid) == 100


def test_the_reported_loss_cannot_happen_the_second_owner_is_refused_before_anything_moves(
    store: Store,
) -> None:
    """A plans [0, 100); B, at the same epoch, wanted [0, 150) and overwrote A's plan;
    A's commit then moved the cursor to 150: offsets 100..149 were lost."""
    tid = _setup(store)
    planned = _plan(store, A, 100)
    with pytest.raises(SubscriptionInUseError, match=REFUSED_D):
        _plan(store, B, 150, ack=True)  # at-most-once would move the cursor at planning
    assert _stored_plan(store) == planned  # A's plan was not overwritten
    assert _cursor(store, tid) == 0  # nothing moved
    assert _owner(store) == A
    assert _commit(store, A)
    assert _cursor(store, tid) == 100  # A's batch, not B's: 100..149 are still to read
    assert [(s.start, s.end) for s in _plan(store, A, 150, batch="next").spans] == [(100, 150)]


def test_the_refusal_is_a_config_error_with_its_own_reason(store: Store) -> None:
    _setup(store)
    _plan(store, "sink:t/ns/s", 10)
    with pytest.raises(ConfigError) as caught:
        _plan(store, A, 10)
    assert caught.value.reason == "subscription_in_use"
    assert str(caught.value) == (
        "subscription public/default/x: read by sink t/ns/s; function a/b/c cannot share it "
        "(give it another subscription_name)"
    )


def test_a_newer_run_of_the_owner_takes_over_and_the_older_one_is_fenced(store: Store) -> None:
    tid = _setup(store)
    _plan(store, A, 50, epoch=1)
    newer = _plan(store, A, 80, epoch=2, batch="n")  # a restart of the same function
    assert [(s.start, s.end) for s in newer.spans] == [(0, 80)]
    with pytest.raises(StaleRunError, match=r"a newer run \(epoch 2\) reads it"):
        _plan(store, A, 90, epoch=1, batch="late")
    assert not _commit(store, A, epoch=1)  # not the plan of epoch 1 any more
    assert _commit(store, A, epoch=2)
    assert _cursor(store, tid) == 80
    # Another owner stays refused whatever its epoch: epochs fence one owner's runs only.
    with pytest.raises(SubscriptionInUseError, match=REFUSED_D):
        _plan(store, B, 150, epoch=9)


def test_a_commit_naming_another_owner_is_refused(store: Store) -> None:
    tid = _setup(store)
    _plan(store, A, 100)
    with pytest.raises(SubscriptionInUseError, match=REFUSED_D):
        _commit(store, B)
    assert _cursor(store, tid) == 0
    assert _commit(store, None)  # a caller that names no owner is not checked
    assert _cursor(store, tid) == 100


def test_a_commit_after_the_subscription_was_deleted_is_discarded(store: Store) -> None:
    tid = _setup(store)
    _plan(store, A, 100)
    with store.write() as conn:
        subscription.release(conn, NAME)
    assert not _commit(store, A)
    assert _plan(store, A, 100, batch="again").spans[0].start == 0
    assert _commit(store, A)
    assert _cursor(store, tid) == 100


def test_delete_subscription_releases_the_claim(store: Store) -> None:
    tid = _setup(store)
    _plan(store, A, 100)
    assert _commit(store, A)
    with store.write() as conn:
        assert subscription.delete_subscription(conn, NAME) == 1
    assert _owner(store) is None
    plan = _plan(store, B, 150)  # B may have it now, from its starting position
    assert [(s.start, s.end) for s in plan.spans] == [(0, 150)]
    assert _owner(store) == B
    assert _commit(store, B)
    assert _cursor(store, tid) == 150


def test_release_frees_only_its_owners_claim_and_keeps_the_cursors(store: Store) -> None:
    tid = _setup(store)
    _plan(store, A, 100)
    assert _commit(store, A)
    with store.write() as conn:
        assert not subscription.release(conn, NAME, B)
        assert subscription.release(conn, NAME, A)
        assert not subscription.release(conn, NAME)
    assert _plan(store, B, 150, epoch=1, batch="b2").spans[0].start == 100  # resumes
    assert _commit(store, B)
    assert _cursor(store, tid) == 150


def test_plain_readers_share_one_owner_and_a_function_is_refused_it(store: Store) -> None:
    _setup(store)
    _plan(store, None, 10, ack=True)
    _plan(store, None, 20, ack=True, batch="other reader")  # a second plain reader
    assert _owner(store) == subscription.reader_owner(NAME) == f"reader:{NAME}"
    with pytest.raises(
        SubscriptionInUseError,
        match=r"read by a plain sparkfn reader \(no controlId\); function a/b/c cannot",
    ):
        _plan(store, A, 30)
    other = "public/default/y"
    _plan(store, A, 10, name=other)
    with pytest.raises(SubscriptionInUseError, match=r"give it another 'subscription' option"):
        _plan(store, None, 10, name=other)


def test_two_first_claims_at_once_give_one_owner_and_one_clear_refusal(store: Store) -> None:
    """The second waits for the first's transaction (PostgreSQL: on the key; SQLite: the
    write lock) and then sees its claim: no duplicate key error."""
    _setup(store)
    claimed, outcome = threading.Event(), []

    def second() -> None:
        claimed.wait(30)
        try:
            with store.write() as conn:
                subscription.claim(conn, NAME, B)
            outcome.append("claimed")
        except SubscriptionInUseError as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=second)
    thread.start()
    with store.write() as conn:
        subscription.claim(conn, NAME, A)
        claimed.set()
        thread.join(0.5)  # the second claim waits for this transaction
        assert thread.is_alive()
    thread.join(30)
    assert len(outcome) == 1 and outcome[0].startswith(f"subscription {NAME}: read by function {A}")
    assert _owner(store) == A


def test_purging_a_refused_function_leaves_the_owners_subscription(store: Store) -> None:
    tid = _setup(store)
    refused = FunctionConfig.build(
        name="d", tenant="a", namespace="b", py="f.py", inputs=["in"], subscription_name=NAME
    )
    assert refused.fqfn == B and refused.cleanup_subscription
    planned = _plan(store, A, 100)
    purge_function(store, refused)
    assert _owner(store) == A
    assert _stored_plan(store) == planned
    assert _cursor(store, tid) == 0
    assert _commit(store, A)  # the owner's batch in flight still commits


def test_purging_the_owner_frees_a_kept_subscription_for_the_next_function(store: Store) -> None:
    tid = _setup(store)
    config = FunctionConfig.build(
        name="c",
        tenant="a",
        namespace="b",
        py="f.py",
        inputs=["in"],
        subscription_name=NAME,
        cleanup_subscription=False,
    )
    _plan(store, A, 100)
    assert _commit(store, A)
    purge_function(store, config)
    assert _owner(store) is None
    assert _cursor(store, tid) == 100  # kept: the next function resumes here
    assert _plan(store, B, 150).spans[0].start == 100
    with store.read() as conn:
        assert conn.execute(schema.subscription_owners.select()).all()[0].owner == B
