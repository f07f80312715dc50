"""The one commit of a group's batch gives each member what its situation calls for, on both stores.

No Spark: real stores, real topics and subscriptions, staged segments made by
the log's own stager. Seven members in one batch, each in a different
situation; the two that should commit do, each of the others is discarded,
fenced or failed, and nothing of theirs moves. Parts that share a run or a
subscription commit one after the other; an error in one member's commit
costs only that member (the committer bisects).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group import members
from sparkfn.runtime.group.bulk import MemberPart, commit_members
from sparkfn.runtime.group.commit import GroupCommitter
from sparkfn.runtime.group.task import SliceResult
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.executor import TaskSummary
from sparkfn.runtime.query.staging import FunctionBatch
from sparkfn.runtime.stats import InstanceStats
from sparkfn.state.buffer import StateMutation
from sparkfn.state.store import get_state
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.append import MessageColumns, append
from sparkfn.topics.log import end_offsets, stage

GROUP = "bulk-test"
_ids = itertools.count()


def _member(store: Store, name: str) -> tuple[FunctionConfig, int]:
    """A member that has planned a batch over three input messages; (config, epoch)."""
    admin = TopicAdmin(store)
    source = admin.create(f"{name}-in")
    admin.create(f"{name}-out")
    columns = MessageColumns()
    for i in range(3):
        columns.add(f"{name}-{i}".encode(), None, None, None, None)
    append(store, source, None, {0: columns})
    config = FunctionConfig.build(
        name=name, py="fn.py", inputs=[f"{name}-in"], output=f"{name}-out"
    )
    epoch = control.begin_run(store, config.fqfn, "function", 1, "started")
    members.join(store, GROUP, config.fqfn, config, epoch=epoch, version="v1")
    with store.write() as conn:
        subscription.plan_batch(
            conn,
            config.subscription,
            [source],
            "earliest",
            epoch=epoch,
            spark_start="{}",
            spark_end='{"n": 1}',
            ends={(source.id, 0): 3},
            owner=config.fqfn,
        )
    return config, epoch


def _part(store: Store, config: FunctionConfig, epoch: int, value: str) -> MemberPart:
    """The member's staged output: one message, a state key set, one processed message."""
    out = TopicAdmin(store).get(config.output or "")
    columns = MessageColumns()
    columns.add(value.encode(), None, None, None, None)
    segment = stage(store, out, 0, columns.table(None, datetime.now(UTC)))
    stats = InstanceStats()
    stats.received = stats.processed_successfully = 3
    summary = TaskSummary(0, [StateMutation(key="k", value=value.encode())], stats)
    batch = FunctionBatch([(config.output or "", segment)], [summary])
    return MemberPart(config.fqfn, epoch, config, [batch])


def _cursor(store: Store, config: FunctionConfig) -> list[int]:
    with store.read() as conn:
        return sorted(subscription.cursors(conn, config.subscription).values())


def test_each_member_gets_what_its_own_commit_would_give_it(store: Store) -> None:
    run = next(_ids)
    names = ["ok1", "ok2", "left", "stale", "replay", "gone", "dead"]
    made = {n: _member(store, f"b{run}-{n}") for n in names}
    parts = {n: _part(store, config, epoch, f"{n}-out") for n, (config, epoch) in made.items()}

    members.leave(store, made["left"][0].fqfn)
    control.begin_run(store, made["stale"][0].fqfn, "function", 1, "restarted")  # a newer epoch
    with store.write() as conn:  # already committed: this batch is a replay
        replay = made["replay"][0]
        subscription.commit_plan(conn, replay.subscription, made["replay"][1], owner=replay.fqfn)
    TopicAdmin(store).delete(made["gone"][0].output or "")
    death = DeathCause("ValueError", "boom", "", "function", "t")
    dead = made["dead"][0].fqfn
    control.record_death(store, dead, 0, death, fatal=True, epoch=made["dead"][1])

    with store.write() as conn:
        outcome = commit_members(store, conn, list(parts.values()), batch_id=7)

    fqfn = {n: made[n][0].fqfn for n in names}
    assert sorted(cid for cid, _ in outcome.committed) == sorted([fqfn["ok1"], fqfn["ok2"]])
    assert sorted(outcome.discarded) == sorted([fqfn["left"], fqfn["replay"], fqfn["dead"]])
    assert [(p.control_id, type(e).__name__) for p, e in outcome.fenced] == [
        (fqfn["stale"], "StaleRunError")
    ]
    assert [(p.control_id, type(e).__name__) for p, e in outcome.failed] == [
        (fqfn["gone"], "TopicNotFoundError")
    ]
    assert "a newer run (epoch" in str(outcome.fenced[0][1])
    assert f"{made['gone'][0].output}" in str(outcome.failed[0][1])
    admin = TopicAdmin(store)
    for n in names:
        config = made[n][0]
        committed = n in ("ok1", "ok2")
        if n != "gone":
            assert end_offsets(store, admin.get(config.output or "")) == {
                0: (0, 1 if committed else 0)
            }, n
        assert _cursor(store, config) == ([3] if committed or n == "replay" else [0]), n
        state = get_state(store, config.fqfn, "k")
        assert (state.value if state else None) == (f"{n}-out".encode() if committed else None), n
    stats = dict(outcome.committed)
    assert [(i, s.processed_successfully) for i, s in stats[fqfn["ok1"]]] == [(0, 3)]


def test_a_second_run_on_the_same_subscription_commits_after_the_first_and_is_refused(
    store: Store,
) -> None:
    """Two members on one subscription: the owner's part commits, the other's fails with
    the owner named (as its own commit after the owner's would), in one call."""
    run = next(_ids)
    config, epoch = _member(store, f"s{run}-a")
    twin = config.model_copy(update={"name": f"s{run}-b"})
    part = _part(store, config, epoch, "a")
    other = MemberPart(twin.fqfn, epoch, config, part.batches)
    members.join(store, GROUP, twin.fqfn, config, epoch=epoch, version="v1")
    with store.write() as conn:
        outcome = commit_members(store, conn, [other, part], batch_id=1)
    assert [cid for cid, _ in outcome.committed] == [config.fqfn]
    assert [(p.control_id, type(e).__name__) for p, e in outcome.failed] == [
        (twin.fqfn, "SubscriptionInUseError")
    ]
    assert _cursor(store, config) == [3]


def test_an_older_and_a_newer_epoch_of_one_run_in_one_batch(store: Store) -> None:
    """The older epoch's part is discarded (no longer the member's epoch); the newer commits."""
    run = next(_ids)
    config, old = _member(store, f"e{run}")
    newer = control.begin_run(store, config.fqfn, "function", 1, "restarted")
    members.join(store, GROUP, config.fqfn, config, epoch=newer, version="v1")
    with store.write() as conn:
        source = TopicAdmin(store).get(config.inputs[0])
        subscription.plan_batch(
            conn,
            config.subscription,
            [source],
            "earliest",
            epoch=newer,
            spark_start="{}",
            spark_end='{"n": 2}',
            ends={(source.id, 0): 3},
            owner=config.fqfn,
        )
    parts = [_part(store, config, old, "old"), _part(store, config, newer, "new")]
    with store.write() as conn:
        outcome = commit_members(store, conn, parts, batch_id=2)
    assert [cid for cid, _ in outcome.committed] == [config.fqfn]
    assert outcome.discarded == [config.fqfn]
    state = get_state(store, config.fqfn, "k")
    assert state is not None and state.value == b"new"


def test_an_error_in_one_members_commit_fails_that_member_alone(store: Store) -> None:
    """A commit that raises is bisected down to the member that raised: the others commit,
    that one fails with its error (recorded as its death), its cursors unmoved."""
    run = next(_ids)
    made = [_member(store, f"x{run}-{i}") for i in range(5)]
    parts = [_part(store, config, epoch, f"v{i}") for i, (config, epoch) in enumerate(made)]
    bad_config, bad_epoch = made[3]
    bad = parts[3]
    summary = bad.batches[0].summaries[0]
    unwritable = StateMutation(key="unwritable", value=object())  # not bytes: the store refuses
    poisoned = TaskSummary(summary.instance_id, [unwritable], summary.stats)
    parts[3] = MemberPart(
        bad.control_id, bad_epoch, bad_config, [FunctionBatch(bad.batches[0].staged, [poisoned])]
    )
    by_member = {
        (p.control_id, p.epoch): [
            SliceResult(p.control_id, p.epoch, p.config.model_dump_json(), p.batches[0])
        ]
        for p in parts
    }
    GroupCommitter(store.url, str(store.data_dir), GROUP).commit(by_member, 3)
    for i, (config, _) in enumerate(made):
        assert _cursor(store, config) == ([0] if i == 3 else [3]), i
    record = control.read_control(store, bad_config.fqfn)
    assert record is not None and record.instances[0].dead
    assert record.instances[0].death is not None
