"""A group's set-based commit gives each member what its own commit would, on both stores.

No Spark: real stores, real topics and subscriptions, staged segments made by
the log's own stager. Seven members in one batch, each in a different
situation; the two that should commit do, each of the others is discarded or
left to the member-by-member commit, and nothing of theirs moves.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group import members
from sparkfn.runtime.group.bulk import MemberPart, commit_members
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.commit import FunctionBatch
from sparkfn.runtime.query.executor import TaskSummary
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
    assert sorted(outcome.discarded) == sorted([fqfn["left"], fqfn["replay"]])
    assert sorted(outcome.leftover) == sorted([fqfn["stale"], fqfn["gone"], fqfn["dead"]])
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


def test_a_member_sharing_a_subscription_is_left_to_its_own_commit(store: Store) -> None:
    run = next(_ids)
    config, epoch = _member(store, f"s{run}-a")
    twin = config.model_copy(update={"name": f"s{run}-b"})
    part = _part(store, config, epoch, "a")
    other = MemberPart(twin.fqfn, epoch, config, part.batches)
    members.join(store, GROUP, twin.fqfn, config, epoch=epoch, version="v1")
    with store.write() as conn:
        outcome = commit_members(store, conn, [part, other], batch_id=1)
    assert outcome.committed == [] and sorted(outcome.leftover) == sorted([config.fqfn, twin.fqfn])
    assert _cursor(store, config) == [0]
