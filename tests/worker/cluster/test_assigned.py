"""The assignment loop of a cluster worker, on a real PostgreSQL store and membership.

The run's start is the test's own callable (no Spark): what is tested is
what the loop does when a start of an assigned run fails, how it ends the
old version of a run updated while it was away, and how a start that no
worker has room for is answered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from sqlalchemy import update

from sparkfn.api.errors import NoWorkerCapacityError
from sparkfn.api.lifecycle import StopMode
from sparkfn.config.function import FunctionConfig
from sparkfn.store.cluster_schema import cluster_workers
from sparkfn.store.store import Store
from sparkfn.worker.assigned import Assigned, update_mode, wanted
from sparkfn.worker.cluster.leader_loop import LeaderLoop
from sparkfn.worker.cluster.members import drain
from sparkfn.worker.cluster.membership import Membership
from sparkfn.worker.cluster_work import ClusterWork
from sparkfn.worker.registry import Desired, HostedConfig, Registry
from sparkfn.worker.runs import Runs
from sparkfn.worker.settings import WorkerSettings
from waiting import until

FQFN = "public/default/flaky"


def _no_spark() -> None:
    raise AssertionError("the loop started Spark")


def _runs(store: Store, worker_id: str) -> Runs:
    """A worker's runs whose starts are the test's own (no Spark)."""
    return Runs(
        WorkerSettings(worker_id=worker_id, store_url=store.url, data_dir=store.data_dir),
        open_store=lambda: store,
        spark=_no_spark,  # type: ignore[arg-type]
        group_for=lambda _: None,
        on_worker_shutdown=lambda _: None,
    )


def test_an_assigned_run_whose_start_failed_is_started_at_a_later_round(pg_store: Store) -> None:
    """A start that fails (the store failed, or the worker was out of its cluster at that
    moment) was recorded as done in its epoch, and the run stayed unstarted for good: a
    function assigned to a live worker that never ran. Now it is tried again, backing off."""
    config = FunctionConfig.build(name="flaky", py="f.py", inputs=["in"], output="out")
    Registry(pg_store, FunctionConfig).create(config, package_digest=None, who="test")
    member = Membership(pg_store, "w", host="h", port=1, lease=1.5)
    member.start()
    tries: list[str] = []

    def start(config: HostedConfig) -> bool:
        tries.append(config.fqfn if isinstance(config, FunctionConfig) else "?")
        if len(tries) == 1:
            msg = "the store did not answer"
            raise RuntimeError(msg)
        return True

    runs = _runs(pg_store, "w")
    assigned = Assigned(pg_store, runs, member, ready=threading.Event(), start=start)
    try:
        LeaderLoop(pg_store, member, lambda: wanted(pg_store)).round()  # placed on w
        assert assigned.round() == []  # the start failed
        assert assigned.round() == []  # backing off: not at once
        assert tries == [FQFN]
        until(lambda: assigned.round() == [FQFN], "the run started at a later round", 10)
        assert tries == [FQFN, FQFN]
        assert assigned.round() == []  # started: not again
        assert len(tries) == 2
    finally:
        member.close()


class _Run:
    """What the loop sees of a run it started: its config, and the modes it was stopped by
    (the test's own start made it: no Spark)."""

    def __init__(self, config: FunctionConfig) -> None:
        self.config = config
        self.supervisor = SimpleNamespace(ended=False)
        self.stopped: list[StopMode] = []

    def stop(self, mode: StopMode, timeout: float) -> bool:
        self.stopped.append(mode)
        self.supervisor.ended = True
        return True

    def wait(self, timeout: float) -> None:
        return None


def _recording_start(runs: Runs, started: list[_Run]) -> Callable[[HostedConfig], bool]:
    """A start that records a :class:`_Run` of the config in ``runs`` (no Spark)."""

    def start(config: HostedConfig) -> bool:
        assert isinstance(config, FunctionConfig)
        run = _Run(runs._query_config(config))  # type: ignore[arg-type]
        started.append(run)
        runs._runs[config.fqfn] = run  # type: ignore[assignment]
        return True

    return start


def test_an_update_received_while_the_owner_was_away_ends_its_version_by_the_mode_asked(
    pg_store: Store,
) -> None:
    """An update done where it landed (its owner's lease had run out) keeps its stop mode in
    the registry; the owner, back and still assigned the run, ends its old version by that
    mode (a suspend here), not always by a drain."""
    name = "updated"
    registry = Registry(pg_store, FunctionConfig)
    config = FunctionConfig.build(name=name, py="f.py", inputs=["in"], output="out")
    registry.create(config, package_digest=None, who="test")
    member = Membership(pg_store, "w", host="h", port=1, lease=1.5)
    member.start()
    started: list[_Run] = []
    runs = _runs(pg_store, "w")
    start = _recording_start(runs, started)
    assigned = Assigned(pg_store, runs, member, ready=threading.Event(), start=start)
    try:
        until(lambda: member.is_leader, "w leads", 10)
        LeaderLoop(pg_store, member, lambda: wanted(pg_store)).round()
        assert assigned.round() == [f"public/default/{name}"]
        newer = config.model_copy(update={"output": "out2"})
        registry.update(newer, package_digest=None, who="test", mode=StopMode.SUSPEND.value)
        assert update_mode(pg_store, f"public/default/{name}") is StopMode.SUSPEND
        assert assigned.round() == [f"public/default/{name}"]
        assert [run.stopped for run in started] == [[StopMode.SUSPEND], []]
        assert started[1].config.output == "public/default/out2"
        registry.update(config, package_digest=None, who="test")  # no mode kept: a drain
        assert assigned.round() == [f"public/default/{name}"]
        assert started[1].stopped == [StopMode.DRAIN]
    finally:
        member.close()


def test_a_start_that_no_worker_has_room_for_is_refused_and_left_stopped(pg_store: Store) -> None:
    """A create or start that the leader cannot place (every live worker at its capacity)
    is refused with ``no_worker_capacity`` and its desired state set back to stopped, not
    answered as a success while nothing runs; once there is room it starts."""
    member = Membership(pg_store, "w", host="h", port=1, capacity=1, lease=1.5)
    member.start()
    runs = _runs(pg_store, "w")
    work = ClusterWork(pg_store, runs, member, ready=threading.Event(), start=lambda _: True)
    registry = Registry(pg_store, FunctionConfig)
    first, second = (
        FunctionConfig.build(name=name, py="f.py", inputs=["in"], output="out")
        for name in ("first", "second")
    )
    for config in (first, second):
        registry.create(config, package_digest=None, who="test")
    work.start()
    try:
        until(lambda: work.owner_of("public/default/first") == "w", "first placed on w", 10)
        with pytest.raises(NoWorkerCapacityError) as caught:
            runs.start(second)  # refused by the gate, before anything starts
        assert caught.value.reason == "no_worker_capacity"
        assert str(caught.value) == (
            "function public/default/second was not started: no worker of the cluster has "
            "room for it (1 live worker(s), 1 run(s) assigned, capacity 1 in all); start it "
            "once a worker joins or has room (SPARKFN_WORKER_CAPACITY)"
        )
        assert registry.record(second.fqfn).desired is Desired.STOPPED
        assert work.owner_of("public/default/second") is None
        registry.set_desired(first.fqfn, Desired.STOPPED)  # room again
        registry.set_desired(second.fqfn, Desired.RUNNING)
        assert work._gate("public/default/second")  # placed here: the start goes on
    finally:
        work.close()
        member.close()


def test_a_start_of_a_run_left_on_a_drained_worker_starts_elsewhere_or_is_refused(
    pg_store: Store,
) -> None:
    """A start or restart that lands while its run is still assigned to a drained worker
    (the leader has not moved it yet) was taken as placed: answered as a success, and then
    the run waited unassigned when no other worker had room. Now the run is placed first:
    on a worker with room, which starts it (not the drained one); with none, refused with
    ``no_worker_capacity`` and left stopped. The drained worker's own loop, starting the
    run it read as assigned just before, is never refused and stops nothing."""
    registry = Registry(pg_store, FunctionConfig)
    for name in ("f", "g"):
        config = FunctionConfig.build(name=name, py="f.py", inputs=["in"], output="out")
        registry.create(config, package_digest=None, who="test")
    members = {w: Membership(pg_store, w, host="h", port=1, capacity=1, lease=1.5) for w in "ab"}
    for member in members.values():
        member.start()
    works = {
        w: ClusterWork(pg_store, _runs(pg_store, w), m, ready=threading.Event(), start=bool)
        for w, m in members.items()
    }  # their loops not started: the test plays the leader's rounds
    leader = LeaderLoop(pg_store, members["a"], lambda: wanted(pg_store))
    f, g = "public/default/f", "public/default/g"
    try:
        assert members["a"].is_leader
        leader.round()
        drained = works["a"].owner_of(f)
        assert drained is not None
        other = next(w for w in works if w != drained)
        assert works[other].owner_of(g) == other  # the other worker is full
        assert drain(pg_store, drained)
        for work in works.values():
            work.leader.interval = 0.1  # the gate's wait for a leader that plays no round

        with pytest.raises(NoWorkerCapacityError) as caught:
            works[drained]._gate(f)  # a restart on the drained worker, before the leader moved f
        assert "no worker of the cluster has room for it (2 live worker(s), 1 run(s)" in str(
            caught.value
        )
        assert registry.record(f).desired is Desired.STOPPED
        assert works[drained].owner_of(f) == drained  # nothing moved it, nothing started it

        registry.set_desired(f, Desired.RUNNING)  # the loop's own start, read just before
        works[drained].assigned._own.key = f
        assert works[drained]._gate(f)  # still assigned there: it goes on, refusing nothing
        works[drained].assigned._own.key = None
        assert registry.record(f).desired is Desired.RUNNING

        with pg_store.write() as conn:  # room on the other worker: the start goes there
            conn.execute(
                update(cluster_workers)
                .where(cluster_workers.c.worker_id == other)
                .values(capacity=2)
            )
        assert not works[drained]._gate(f)  # not placed: the leader has not played
        leader.round()
        assert works[drained].owner_of(f) == other
        assert not works[drained]._gate(f)
        assert works[other]._gate(f)
        assert registry.record(f).desired is Desired.RUNNING
    finally:
        for member in members.values():
            member.close()


def test_a_restart_while_the_owner_is_out_for_a_moment_is_started_once_it_is_back(
    pg_store: Store,
) -> None:
    """A restart ends the run, then its start is gated: on an owner out of its cluster for
    a moment (a heartbeat late under load) the gate says no. The loop had noted the run
    as started in its epoch, so it took it for one that ended by itself and left it
    ended, assigned here and desired running, for good. Now the loop starts it again
    once the worker is back."""
    name = "restarted"
    config = FunctionConfig.build(name=name, py="f.py", inputs=["in"], output="out")
    Registry(pg_store, FunctionConfig).create(config, package_digest=None, who="test")
    member = Membership(pg_store, "w", host="h", port=1, lease=1.5)
    member.start()
    runs = _runs(pg_store, "w")
    started: list[_Run] = []
    start = _recording_start(runs, started)

    work = ClusterWork(pg_store, runs, member, ready=threading.Event(), start=start)
    runs.gate = work._gate
    key = f"public/default/{name}"
    try:
        until(lambda: member.is_leader, "w leads", 10)
        work.leader.round()
        assert work.assigned.round() == [key]
        member._fence()  # out for a moment: the heartbeat thread has it rejoin
        runs.end(key, StopMode.SUSPEND)  # the restart's end, then its start
        assert runs.start(config) is None  # not a member now: the gate said no
        until(lambda: work.assigned.round() == [key], "the run started again once back", 10)
        assert len(started) == 2
        assert started[0].stopped == [StopMode.SUSPEND]
    finally:
        member.close()
