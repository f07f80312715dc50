"""The status and stats models: Pulsar's JSON keys by alias, Python names by attribute."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from sparkfn.api.lifecycle import DeathCause, RunState
from sparkfn.api.status import (
    DeathException,
    FunctionInstanceStatsData,
    FunctionInstanceStatsDataBase,
    FunctionStats,
    FunctionStatus,
    SourceStatus,
)

EXCEPTION = {
    "exceptionString": "ValueError: bad input",
    "timestampMs": 1_700_000_000_123,
    "type": "ValueError",
    "message": "bad input",
    "traceback": "Traceback (most recent call last): ...",
    "messageId": "0:17",
}
DEATH = {
    "type": "RuntimeError",
    "message": "boom",
    "traceback": "Traceback ...",
    "origin": "fatal",
    "thread": "worker-1",
}
FUNCTION_STATUS = {
    "name": "public/default/upper",
    "state": "ERROR",
    "numInstances": 2,
    "numRunning": 1,
    "numRestarts": 3,
    "unclosedObjects": ["instance 1: Pool.close()"],
    "instances": [
        {
            "instanceId": 0,
            "status": {
                "running": True,
                "error": "",
                "numRestarts": 3,
                "numReceived": 10,
                "numSuccessfullyProcessed": 9,
                "numUserExceptions": 1,
                "latestUserExceptions": [EXCEPTION],
                "numSystemExceptions": 0,
                "latestSystemExceptions": [],
                "numFatalExceptions": 0,
                "numDeadLettered": 1,
                "averageLatency": 0.25,
                "lastInvocationTime": 1_700_000_000_500,
                "workerId": "localrun",
                "state": "RUNNING",
                "deathException": None,
            },
        },
        {
            "instanceId": 1,
            "status": {
                "running": False,
                "error": "RuntimeError: boom",
                "numRestarts": 0,
                "numReceived": 0,
                "numSuccessfullyProcessed": 0,
                "numUserExceptions": 0,
                "latestUserExceptions": [],
                "numSystemExceptions": 0,
                "latestSystemExceptions": [],
                "numFatalExceptions": 1,
                "numDeadLettered": 0,
                "averageLatency": 0.0,
                "lastInvocationTime": 0,
                "workerId": "localrun",
                "state": "ERROR",
                "deathException": DEATH,
            },
        },
    ],
}
ONE_MIN = {
    "receivedTotal": 4,
    "processedSuccessfullyTotal": 3,
    "systemExceptionsTotal": 0,
    "userExceptionsTotal": 1,
    "avgProcessLatency": 0.5,
}
METRICS = {
    "receivedTotal": 10,
    "processedSuccessfullyTotal": 9,
    "systemExceptionsTotal": 0,
    "userExceptionsTotal": 1,
    "avgProcessLatency": 0.25,
    "deadLetteredTotal": 1,
    "1min": ONE_MIN,
    "lastInvocation": 1_700_000_000_500,
    # Pulsar's flat map of doubles (user_metric_<name>_sum, _count), sparkfn's _min, _max.
    "userMetrics": {
        "user_metric_length_sum": 7.0,
        "user_metric_length_count": 2.0,
        "user_metric_length_min": 3.0,
        "user_metric_length_max": 4.0,
        "user_metric_never_sum": 0.0,
        "user_metric_never_count": 0.0,
    },
}
FUNCTION_STATS = {**METRICS, "instances": [{"instanceId": 0, "metrics": METRICS}]}
SOURCE_STATUS = {
    "name": "public/default/gen",
    "state": "STOPPED",
    "instances": [
        {
            "instanceId": 0,
            "state": "STOPPED",
            "stats": {
                "received": 5,
                "appended": 5,
                "deduplicated": 0,
                "acked": 5,
                "commits": 1,
                "errors": 0,
                "dropped": 0,
            },
            "deathException": None,
            "numRestarts": 0,
        }
    ],
    "unclosedObjects": [],
}


@pytest.mark.parametrize(
    ("model", "shape"),
    [
        (FunctionStatus, FUNCTION_STATUS),
        (FunctionStats, FUNCTION_STATS),
        (SourceStatus, SOURCE_STATUS),
    ],
    ids=["function-status", "function-stats", "source-status"],
)
def test_the_json_by_alias_is_the_pulsar_shape_it_was_read_from(
    model: type[BaseModel], shape: dict[str, Any]
) -> None:
    parsed = model.model_validate(shape)
    assert parsed.model_dump(by_alias=True, mode="json") == shape
    # The text --json-status prints, and what a REST client gets, parse to the same.
    assert json.loads(json.dumps(parsed.model_dump(by_alias=True, mode="json"))) == shape
    assert json.loads(parsed.model_dump_json(by_alias=True)) == shape
    # The keys come in the order Pulsar's JSON has them.
    assert list(parsed.model_dump(by_alias=True)) == list(shape)


def test_python_reads_and_builds_by_snake_case_attribute() -> None:
    status = FunctionStatus.model_validate(FUNCTION_STATUS)
    first, second = status.instances
    assert (status.num_instances, status.num_running, status.num_restarts) == (2, 1, 3)
    assert status.unclosed_objects == ["instance 1: Pool.close()"]
    assert first.status.num_successfully_processed == 9
    assert first.status.latest_user_exceptions[0].message_id == "0:17"
    assert first.status.latest_user_exceptions[0].exception_string == "ValueError: bad input"
    assert second.status.death_exception is not None
    assert second.status.death_exception.thread == "worker-1"
    rebuilt = FunctionStatus(
        name=status.name,
        state=status.state,
        num_instances=status.num_instances,
        num_running=status.num_running,
        num_restarts=status.num_restarts,
        unclosed_objects=status.unclosed_objects,
        instances=status.instances,
    )
    assert rebuilt == status


def test_state_is_a_run_state_that_serialises_to_its_value() -> None:
    status = FunctionStatus.model_validate(FUNCTION_STATUS)
    assert status.state is RunState.ERROR
    assert status.instances[0].status.state is RunState.RUNNING
    assert status.state == "ERROR"  # a StrEnum: equal to the stored string
    assert status.model_dump(by_alias=True, mode="json")["state"] == "ERROR"
    assert type(status.model_dump(by_alias=True, mode="json")["state"]) is str
    assert json.dumps({"state": status.state}) == '{"state": "ERROR"}'
    with pytest.raises(ValidationError, match="state"):
        FunctionStatus.model_validate({**FUNCTION_STATUS, "state": "WEDGED"})


def test_the_one_minute_stats_are_under_1min() -> None:
    stats = FunctionInstanceStatsData(one_min=FunctionInstanceStatsDataBase(received_total=4))
    dumped = stats.model_dump(by_alias=True, mode="json")
    assert "1min" in dumped and "oneMin" not in dumped and "one_min" not in dumped
    assert dumped["1min"]["receivedTotal"] == 4
    assert FunctionInstanceStatsData.model_validate(METRICS).one_min.avg_process_latency == 0.5
    # By attribute name too, as the Python side builds it.
    by_name = FunctionInstanceStatsData.model_validate({"one_min": ONE_MIN})
    assert by_name.one_min.user_exceptions_total == 1
    # Python's own dump uses the attribute names.
    assert "one_min" in stats.model_dump()


def test_a_key_that_is_not_in_the_shape_is_refused() -> None:
    with pytest.raises(ValidationError, match="numReceivd"):
        FunctionStatus.model_validate(
            {**FUNCTION_STATUS, "instances": [{"instanceId": 0, "status": {"numReceivd": 1}}]}
        )


def test_a_death_cause_is_shown_as_its_death_exception() -> None:
    cause = DeathCause("RuntimeError", "boom", "Traceback ...", "fatal", "worker-1")
    shown = DeathException.of(cause)
    assert shown is not None
    assert shown.model_dump(by_alias=True) == DEATH
    assert DeathException.of(None) is None


def test_models_are_snapshots() -> None:
    status = FunctionStatus.model_validate(FUNCTION_STATUS)
    with pytest.raises(ValidationError, match="frozen"):
        status.num_running = 0  # type: ignore[misc]
