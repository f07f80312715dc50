"""A source's writers of state raise on a move the stored record refuses, never only log it;
the supervisor's writers meet the races of a source's instances as outcomes, and a move
refused on its thread ends the run in ERROR instead of being retried."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from connector_probes import WAIT_SECONDS, ScriptedSource
from sqlalchemy import delete, update

from sparkfn.api.connector import END_OF_STREAM, Record
from sparkfn.api.errors import InstanceStoppingError
from sparkfn.api.lifecycle import RunState
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.runner import SourceRunner
from sparkfn.connectors.source.source_run import SourceRun
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.states import IllegalTransition
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from waiting import until


def _config() -> SourceConfig:
    return SourceConfig(name="refused", classname="probes.Probe", output="out")


def test_a_source_group_raises_when_the_record_refuses_its_runners_move(store: Store) -> None:
    group = SourceInstances(_config(), store)
    group.supervised = True  # its supervisor records the run; the instances are the group's
    control.begin_run(store, group.control_id, "source", 1, "started")
    where = control.instance_runs.c.fqfn == group.control_id
    with store.write() as conn:  # never started: it cannot be stopping
        conn.execute(update(control.instance_runs).where(where).values(state="CREATED"))
    before = control.transitions_of(store, group.control_id)
    with pytest.raises(IllegalTransition, match="instance 0: CREATED -> STOPPING"):
        group._record(group.runners[0], "RUNNING", "STOPPING", "stop requested")
    assert control.transitions_of(store, group.control_id) == before


def test_the_runner_thread_raises_a_refused_move_once_closed_and_done(store: Store) -> None:
    TopicAdmin(store).create("out", partitions=1, schema_type="string")
    source = ScriptedSource([Record("a")], then=END_OF_STREAM)

    def refuse_the_end(old: str, new: str, cause: str) -> None:
        if new == "STOPPED":
            msg = f"refused: {old} -> {new}"
            raise IllegalTransition(msg)

    raised: list[BaseException | None] = []
    done = threading.Event()
    runner = SourceRunner(_config(), store, factory=lambda: source, on_transition=refuse_the_end)
    runner.on_done = done.set

    def record(args: Any) -> None:
        raised.append(args.exc_value)

    original, threading.excepthook = threading.excepthook, record
    try:
        runner.start()
        assert runner.join(WAIT_SECONDS)
    finally:
        threading.excepthook = original
    assert done.is_set() and runner.wait(0)  # whoever waits for it is told
    source.log.assert_closed_once_and_last()
    assert [type(e) for e in raised] == [IllegalTransition]
    assert "refused: STOPPING -> STOPPED" in str(raised[0])


# --- the supervisor's writers, over real source runners ------------------------------------


def _run(store: Store, sources: list[ScriptedSource], **policy: Any) -> SourceRun:
    TopicAdmin(store).create("out", partitions=1, schema_type="string")
    config = SourceConfig(
        name="races",
        classname="probes.Probe",
        output="out",
        parallelism=len(sources),
        poll_interval=0.01,
        batch_timeout=0.01,
        failure_policy={"backoff_initial": 0.1, "close_timeout": 10, **policy},
    )
    return SourceRun(config, store, factory=lambda i: sources[i]).start()


def _states(store: Store, run: SourceRun) -> tuple[str, dict[int, str]]:
    record = control.read_control(store, run.instances.control_id)
    assert record is not None
    return record.state, {i: r.state for i, r in record.instances.items()}


def test_restarting_an_instance_the_policy_shut_down_starts_it_again(store: Store) -> None:
    # The user's restart of one instance is a cancel, then a start: the cancel of
    # an instance in ERROR (shut down) used to be refused (ERROR -> STOPPED), a 500.
    # Its record is kept as it is (an outcome the stop acts on: nothing to stop).
    sources = [ScriptedSource(then=None), ScriptedSource(fail_in="read")]
    run = _run(store, sources, on_fatal="SHUTDOWN_INSTANCE")
    try:
        until(lambda: _states(store, run)[1][1] == "ERROR", "instance 1 shut down", WAIT_SECONDS)
        until(lambda: control.read_control(store, run.instances.control_id).instances[1].handled,  # type: ignore[union-attr]
              "its death handled", WAIT_SECONDS)  # fmt: skip
        run.supervisor.stop_instance(1, "cancel")
        assert _states(store, run)[1][1] == "ERROR"  # kept: it had ended
        sources[1].fail_in = None
        run.supervisor.restart_instance(1)
        until(lambda: _states(store, run)[1][1] == "RUNNING", "instance 1 again", WAIT_SECONDS)
        assert _states(store, run)[0] == "RUNNING"
    finally:
        run.stop("drain")
    assert run.wait(WAIT_SECONDS) and run.join(WAIT_SECONDS)
    assert _states(store, run) == ("STOPPED", {0: "STOPPED", 1: "STOPPED"})
    moves = [(t["instance"], t["from"], t["to"]) for t in run.transitions()]
    assert (1, "ERROR", "RUNNING") in moves and (1, "ERROR", "STOPPED") not in moves


def test_a_run_shut_down_while_draining_keeps_the_instance_shut_down_before(
    store: Store,
) -> None:
    # Instance 1 is shut down alone; then the run drains and instance 0 dies in
    # prepare_to_shutdown(): a death while stopping shuts the whole run down.
    # The others are cancelled (STOPPED), but instance 1 had ended in ERROR: the
    # move ERROR -> STOPPED was refused and the supervisor retried that step forever.
    sources = [ScriptedSource(then=None, fail_in="prepare_to_shutdown"), ScriptedSource(fail_in="read")]  # fmt: skip
    run = _run(store, sources, on_fatal="SHUTDOWN_INSTANCE")
    until(lambda: control.read_control(store, run.instances.control_id).instances[1].handled,  # type: ignore[union-attr]
          "instance 1 shut down", WAIT_SECONDS)  # fmt: skip
    run.stop("drain")
    assert run.wait(WAIT_SECONDS), run.transitions()
    assert run.join(WAIT_SECONDS)
    assert _states(store, run) == ("ERROR", {0: "ERROR", 1: "ERROR"})
    last = [t for t in run.transitions() if t["instance"] is None][-1]
    assert last["to"] == "ERROR" and "SHUTDOWN_FUNCTION" in last["cause"], last
    for source in sources:
        source.log.assert_closed_once_and_last()


def test_the_supervisor_ends_the_run_in_error_on_a_refused_move_and_does_not_retry(
    store: Store,
) -> None:
    source = ScriptedSource(then=None)
    run = _run(store, [source])
    cid = run.instances.control_id
    # Reading: the runner's own report of its open is recorded (it could undo the setup below).
    until(lambda: source.log.count("read") > 0, "the source read", WAIT_SECONDS)
    assert _states(store, run) == ("RUNNING", {0: "RUNNING"})
    where = control.instance_runs.c.fqfn == cid
    with store.write() as conn:  # a state no writer leaves it in: the next move is refused
        conn.execute(update(control.instance_runs).where(where).values(state="CREATED"))
    run.supervisor.stop_instance(0, "suspend")  # its thread moves it CREATED -> STOPPING
    assert run.wait(WAIT_SECONDS), run.transitions()
    failure = run.supervisor.failure
    assert failure is not None and failure.cause.type == "IllegalTransition", failure
    assert "instance 0: CREATED -> STOPPING is not a legal move" in failure.cause.message
    assert run.supervisor.state is RunState.ERROR
    run_moves = [t for t in run.transitions() if t["instance"] is None]
    assert (run_moves[-1]["from"], run_moves[-1]["to"]) == ("RUNNING", "ERROR")
    assert run_moves[-1]["cause"].startswith("defect: ")
    assert run.join(WAIT_SECONDS)
    source.log.assert_closed_once_and_last()


class _SlowOpen(ScriptedSource):
    """Its ``open()`` returns once the test lets it."""

    def __init__(self) -> None:
        super().__init__(then=None)
        self.opening = threading.Event()
        self.go = threading.Event()

    def open(self, config: Any, context: Any) -> None:
        self.opening.set()
        assert self.go.wait(WAIT_SECONDS)
        super().open(config, context)


def test_a_stop_during_open_stands_and_the_runner_ends_as_asked(store: Store) -> None:
    # The stop moved the runner to STOPPING while open() ran; its "opened" then
    # tried STOPPING -> RUNNING, was refused, and the instance died of it (a
    # restarted instance meeting a drain ended its run in ERROR).
    TopicAdmin(store).create("out", partitions=1, schema_type="string")
    source = _SlowOpen()
    moves: list[tuple[str, str]] = []
    runner = SourceRunner(
        _config(), store, factory=lambda: source, on_transition=lambda a, b, _: moves.append((a, b))
    )
    runner.start()
    assert source.opening.wait(WAIT_SECONDS)
    runner.stop("drain")
    source.go.set()
    assert runner.join(WAIT_SECONDS)
    assert runner.death is None and runner.state is RunState.STOPPED
    assert moves == [("CREATED", "STARTING"), ("STARTING", "STOPPING"), ("STOPPING", "STOPPED")]
    source.log.assert_closed_once_and_last()


def test_a_run_whose_record_is_deleted_under_it_ends_instead_of_looking_on(store: Store) -> None:
    # Its supervisor returned from every look without a word, for ever.
    source = ScriptedSource(then=None)
    run = _run(store, [source])
    cid = run.instances.control_id
    until(lambda: source.log.count("read") > 0, "the source read", WAIT_SECONDS)
    with store.write() as conn:
        conn.execute(delete(control.instance_runs).where(control.instance_runs.c.fqfn == cid))
        conn.execute(delete(control.runs).where(control.runs.c.fqfn == cid))
    raised: list[BaseException | None] = []
    original, threading.excepthook = threading.excepthook, lambda a: raised.append(a.exc_value)
    try:
        run.supervisor.wake()
        assert run.wait(WAIT_SECONDS)
        assert run.join(WAIT_SECONDS)
    finally:
        threading.excepthook = original
    failure = run.supervisor.failure
    assert failure is not None and "the run's record is gone while it runs" in str(failure)
    assert run.supervisor.state is RunState.ERROR
    source.log.assert_closed_once_and_last()
    # The runner's own report of its end is refused as well, and raised once it is done.
    assert [type(e) for e in raised] == [IllegalTransition]
    assert "instance 0: no record to move to STOPP" in str(raised[0])


def test_an_instance_is_not_started_again_while_the_whole_run_stops(store: Store) -> None:
    # A restart of one instance during the run's drain used to revive it after the
    # run's end-of-stream step was under way: it would never get that step, and
    # the stop would wait for it. It is refused, naming the run's stop.
    release = threading.Event()

    class Held(ScriptedSource):
        def prepare_to_shutdown(self) -> Any:  # the drain cannot end before release
            release.wait(WAIT_SECONDS)
            return super().prepare_to_shutdown()

    sources = [Held(then=None), ScriptedSource(then=None)]
    run = _run(store, sources)
    assert run.supervisor is not None
    try:
        until(lambda: _states(store, run) == ("RUNNING", {0: "RUNNING", 1: "RUNNING"}),
              "both instances running", WAIT_SECONDS)  # fmt: skip
        run.supervisor.stop_instance(1, "cancel")
        assert _states(store, run)[1][1] == "STOPPED"
        run.stop("drain")
        with pytest.raises(InstanceStoppingError, match="races is draining; instance 1"):
            run.supervisor.restart_instance(1)
        assert _states(store, run)[1][1] == "STOPPED"  # not revived
    finally:
        release.set()
    assert run.wait(WAIT_SECONDS) and run.join(WAIT_SECONDS)
    assert _states(store, run) == ("STOPPED", {0: "STOPPED", 1: "STOPPED"})
    with pytest.raises(InstanceStoppingError, match="has ended"):
        run.supervisor.restart_instance(1)
    moves = [(t["instance"], t["from"], t["to"]) for t in run.transitions()]
    assert (1, "STOPPED", "RUNNING") not in moves
