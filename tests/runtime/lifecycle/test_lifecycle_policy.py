"""The failure policy's decision and the lifecycle's state machines, without Spark.

``decide`` is pure: each case passes the restart history and the time in,
and a handler (a plain function) where one is configured.
"""

from __future__ import annotations

from typing import Any

import pytest

from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import DeathCause, FailureInfo, Response, RunState, StopMode
from sparkfn.config.policy import FailurePolicy
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.policy import RestartHistory, decide
from sparkfn.runtime.lifecycle.states import (
    FINAL_STATES,
    INSTANCE_TRANSITIONS,
    RUN_TRANSITIONS,
    RUNNER_TRANSITIONS,
    IllegalTransition,
    can_move,
    transition,
)
from sparkfn.store.store import Store

BOOM = DeathCause("ValueError", "boom", "", "connector", "t")


def _failure(*, fatal: bool, instance: int | None = 0) -> FunctionFailure:
    return FunctionFailure("public/default/f", instance, BOOM, fatal)


POLICY = FailurePolicy(
    max_restarts=3, restart_window=60, backoff_initial=1, backoff_multiplier=2, backoff_max=5
)


# --- decide ------------------------------------------------------------------------


def test_defaults_replace_a_failure_and_shut_a_fatal_error_down() -> None:
    policy = FailurePolicy()
    fresh = RestartHistory(now=100.0)
    failure = decide(_failure(fatal=False), policy, fresh)
    assert (failure.response, failure.delay, failure.escalated) == (
        Response.REPLACE_INSTANCE,
        policy.backoff_initial,
        False,
    )
    fatal = decide(_failure(fatal=True), policy, fresh)
    assert fatal.response is Response.SHUTDOWN_FUNCTION
    assert fatal.delay == 0.0


def test_backoff_grows_with_the_restarts_in_the_window_and_is_capped() -> None:
    delays = [
        decide(_failure(fatal=False), POLICY, RestartHistory(tuple(range(n)), 10.0)).delay
        for n in range(3)
    ]
    assert delays == [1.0, 2.0, 4.0]
    capped = FailurePolicy(max_restarts=10, backoff_initial=1, backoff_max=5)
    history = RestartHistory(tuple(float(t) for t in range(6)), 10.0)
    assert decide(_failure(fatal=False), capped, history).delay == 5.0


def test_max_restarts_within_the_window_escalates_to_shutdown_function() -> None:
    history = RestartHistory((50.0, 55.0, 58.0), now=60.0)
    decision = decide(_failure(fatal=False), POLICY, history)
    assert decision.response is Response.SHUTDOWN_FUNCTION
    assert decision.chosen is Response.REPLACE_INSTANCE
    assert decision.escalated


def test_restarts_older_than_the_window_are_forgotten() -> None:
    history = RestartHistory((0.0, 1.0, 2.0), now=100.0)  # all more than 60 s ago
    decision = decide(_failure(fatal=False), POLICY, history)
    assert decision.response is Response.REPLACE_INSTANCE
    assert decision.delay == 1.0
    later = history.restarted(100.0, POLICY.restart_window)
    assert later.times == (100.0,) and later.now == 100.0


def test_on_fatal_replace_instance_restarts_a_fatal_death() -> None:
    policy = FailurePolicy(on_fatal=Response.REPLACE_INSTANCE)
    decision = decide(_failure(fatal=True), policy, RestartHistory())
    assert decision.response is Response.REPLACE_INSTANCE


def test_no_restart_while_the_run_is_stopping() -> None:
    decision = decide(_failure(fatal=False), POLICY, RestartHistory(), stopping=True)
    assert decision.response is Response.SHUTDOWN_FUNCTION


def test_a_handler_decides_and_sees_the_failure_and_the_recent_restarts() -> None:
    seen: list[tuple[FunctionFailure, FailureInfo]] = []

    def handler(failure: FunctionFailure, info: FailureInfo) -> Any:
        seen.append((failure, info))
        return "SHUTDOWN_INSTANCE"  # a string is accepted as a Response

    history = RestartHistory((-5.0, 50.0), now=60.0)  # the first is out of the window
    decision = decide(
        _failure(fatal=True),
        POLICY,
        history,
        instance_ids=[2],
        parallelism=4,
        handler=handler,
    )
    assert decision.response is Response.SHUTDOWN_INSTANCE
    assert decision.handler_error is None
    ((failure, info),) = seen
    assert failure.fatal and failure.cause == BOOM
    assert (info.instance_ids, info.fatal, info.restarts, info.parallelism) == ([2], True, 1, 4)


@pytest.mark.parametrize("answer", ["RAISE", "not a response", None])
def test_a_failing_handler_leaves_the_policy_default(answer: Any) -> None:
    def handler(failure: FunctionFailure, info: FailureInfo) -> Any:
        if answer == "RAISE":
            raise RuntimeError("handler bug")
        return answer

    decision = decide(_failure(fatal=False), POLICY, RestartHistory(), handler=handler)
    assert decision.response is Response.REPLACE_INSTANCE
    assert decision.handler_error is not None
    assert "applying REPLACE_INSTANCE" in decision.handler_error


def test_a_handler_asking_for_replacement_is_still_escalated() -> None:
    history = RestartHistory((1.0, 2.0, 3.0), now=4.0)
    decision = decide(
        _failure(fatal=True),
        POLICY,
        history,
        handler=lambda failure, info: Response.REPLACE_INSTANCE,
    )
    assert decision.response is Response.SHUTDOWN_FUNCTION and decision.escalated


# --- enums and state machines ------------------------------------------------------


def test_stop_modes_and_states_keep_their_stored_strings() -> None:
    assert [m.value for m in StopMode] == ["drain", "suspend", "cancel"]
    assert StopMode.parse(" Cancel ") is StopMode.CANCEL
    with pytest.raises(ValueError, match="not one of: drain, suspend, cancel"):
        StopMode.parse("stop")
    assert [s.value for s in RunState] == [
        "CREATED",
        "STARTING",
        "RUNNING",
        "RESTARTING",
        "STOPPING",
        "STOPPED",
        "SUSPENDED",
        "ERROR",
        "PARKED",
    ]
    assert control.RUNNING == "RUNNING" and control.ERROR is RunState.ERROR
    assert {s for s in RunState if s.final} == FINAL_STATES


def test_a_run_goes_through_restarts_to_a_final_state_and_may_start_again() -> None:
    path = [
        RunState.CREATED,
        RunState.STARTING,
        RunState.RUNNING,
        RunState.RESTARTING,
        RunState.RUNNING,
        RunState.STOPPING,
        RunState.SUSPENDED,
        RunState.STARTING,
    ]
    for old, new in zip(path, path[1:], strict=False):
        assert can_move(old, new), (old, new)
    for live in (RunState.STARTING, RunState.RUNNING, RunState.RESTARTING):
        assert can_move(live, RunState.ERROR) and can_move(live, RunState.STOPPING)
    assert not can_move(RunState.CREATED, RunState.RUNNING)
    assert not can_move(RunState.STOPPED, RunState.RUNNING)
    assert not can_move(RunState.STOPPING, RunState.RUNNING)
    assert set(RUN_TRANSITIONS) == set(RunState)


def test_a_source_runner_thread_lives_once() -> None:
    for final in FINAL_STATES:
        assert not any(can_move(final, s, RUNNER_TRANSITIONS) for s in RunState if s is not final)
    assert not can_move(RunState.RUNNING, RunState.RESTARTING, RUNNER_TRANSITIONS)
    assert can_move(RunState.STOPPING, RunState.ERROR, RUNNER_TRANSITIONS)


def test_a_stored_instance_dies_alone_is_replaced_and_ends_with_its_run() -> None:
    for old, new in [
        (RunState.RUNNING, RunState.ERROR),
        (RunState.ERROR, RunState.RESTARTING),
        (RunState.RESTARTING, RunState.RUNNING),
        (RunState.RUNNING, RunState.SUSPENDED),
        (RunState.STOPPED, RunState.STARTING),
    ]:
        assert can_move(old, new, INSTANCE_TRANSITIONS), (old, new)
    assert not can_move(RunState.STOPPED, RunState.ERROR, INSTANCE_TRANSITIONS)
    assert not can_move(RunState.SUSPENDED, RunState.STOPPING, INSTANCE_TRANSITIONS)


def test_transition_raises_on_an_illegal_move_and_allows_staying() -> None:
    assert transition("RUNNING", "STOPPING", RUN_TRANSITIONS, "f") is RunState.STOPPING
    assert transition(RunState.STOPPED, RunState.STOPPED, RUN_TRANSITIONS, "f") is RunState.STOPPED
    with pytest.raises(IllegalTransition, match="public/default/f: STOPPED -> RUNNING"):
        transition(RunState.STOPPED, RunState.RUNNING, RUN_TRANSITIONS, "public/default/f")


def test_the_stored_record_refuses_an_illegal_move_and_writes_nothing(store: Store) -> None:
    fqfn = f"public/default/moves-{store.dialect}"
    control.begin_run(store, fqfn, "function", 1, "started")
    control.set_state(store, fqfn, control.RUNNING, "started", [control.FUNCTION, 0])
    control.set_state(store, fqfn, control.STOPPING, "drain", [control.FUNCTION])
    control.set_state(store, fqfn, control.STOPPED, "drained", [control.FUNCTION, 0])
    before = control.transitions_of(store, fqfn)
    with pytest.raises(IllegalTransition, match="STOPPED -> RUNNING"):
        control.set_state(store, fqfn, control.RUNNING, "nonsense", [control.FUNCTION])
    assert control.transitions_of(store, fqfn) == before
    record = control.read_control(store, fqfn)
    assert record is not None and record.state == control.STOPPED


def test_a_start_supersedes_a_record_its_dead_process_left_live(store: Store) -> None:
    fqfn = f"public/default/left-{store.dialect}"
    epoch = control.begin_run(store, fqfn, "function", 1, "started")
    control.set_state(store, fqfn, control.RUNNING, "started", [control.FUNCTION, 0])
    control.begin_run(store, fqfn, "function", 1, "worker restarted")  # its worker was killed
    last = control.transitions_of(store, fqfn)[-1]
    assert (last["from"], last["to"]) == ("RUNNING", "STARTING")
    assert f"the run of epoch {epoch} was left RUNNING: its process ended" in last["cause"]


def test_control_ids_keep_kinds_apart() -> None:
    fqfn = "public/default/x"
    ids = {control.control_id(kind, fqfn) for kind in ("function", "sink", "source")}
    assert ids == {fqfn, "sink:public/default/x", "source:public/default/x"}
    with pytest.raises(ValueError, match="kind must be one of"):
        control.control_id("job", fqfn)
