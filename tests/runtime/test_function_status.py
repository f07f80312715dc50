"""Status and stats read from the store: the exact Pulsar JSON, without Spark."""

from __future__ import annotations

from typing import Any

from sparkfn.api.lifecycle import DeathCause, RunState
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.metrics_store import commit_stats
from sparkfn.runtime.stats import ExceptionInfo, InstanceStats
from sparkfn.runtime.status import function_stats, function_status
from sparkfn.store.store import Store

FQFN = "public/default/upper"


def _stats() -> InstanceStats:
    stats = InstanceStats(
        received=4,
        processed_successfully=3,
        dead_lettered=1,
        latency_ms_sum=1.5,
        latency_count=3,
        last_invocation_ms=1_700_000_000_500,
    )
    stats.record_exception(
        ExceptionInfo("user", "ValueError", "bad", "Traceback ...", "0:2", 1_700_000_000_400)
    )
    stats.record_metric("length", 3)
    stats.record_metric("length", 5)
    return stats


def test_status_and_stats_are_pulsars_json_shapes(store: Store) -> None:
    epoch = control.begin_run(store, FQFN, "function", 2, "started")
    control.set_state(store, FQFN, control.RUNNING, "", [control.FUNCTION, 0])
    boom = DeathCause("RuntimeError", "boom", "Traceback ...", "fatal", "worker-1")
    control.record_death(store, FQFN, 1, boom, fatal=True, epoch=epoch)
    with store.write() as conn:
        commit_stats(conn, FQFN, [(0, _stats())])

    status = function_status(store, FQFN, 2, unclosed=["instance 1 in close()"])
    assert status.model_dump(by_alias=True, mode="json") == {
        "name": FQFN,
        "state": "RUNNING",
        "numInstances": 2,
        "numRunning": 1,
        "numRestarts": 0,
        "unclosedObjects": ["instance 1 in close()"],
        "instances": [
            {
                "instanceId": 0,
                "status": {
                    "running": True,
                    "error": "",
                    "numRestarts": 0,
                    "numReceived": 4,
                    "numSuccessfullyProcessed": 3,
                    "numUserExceptions": 1,
                    "latestUserExceptions": [
                        {
                            "exceptionString": "ValueError: bad",
                            "timestampMs": 1_700_000_000_400,
                            "type": "ValueError",
                            "message": "bad",
                            "traceback": "Traceback ...",
                            "messageId": "0:2",
                        }
                    ],
                    "numSystemExceptions": 0,
                    "latestSystemExceptions": [],
                    "numFatalExceptions": 0,
                    "numDeadLettered": 1,
                    "averageLatency": 0.5,
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
                    "deathException": {
                        "type": "RuntimeError",
                        "message": "boom",
                        "traceback": "Traceback ...",
                        "origin": "fatal",
                        "thread": "worker-1",
                    },
                },
            },
        ],
    }
    assert status.instances[1].status.state is RunState.ERROR

    counted: dict[str, Any] = {
        "receivedTotal": 4,
        "processedSuccessfullyTotal": 3,
        "systemExceptionsTotal": 0,
        "userExceptionsTotal": 1,
        "avgProcessLatency": 0.5,
    }
    idle: dict[str, Any] = {
        "receivedTotal": 0,
        "processedSuccessfullyTotal": 0,
        "systemExceptionsTotal": 0,
        "userExceptionsTotal": 0,
        "avgProcessLatency": 0.0,
    }
    busy = {
        **counted,
        "deadLetteredTotal": 1,
        "1min": counted,  # committed just now
        "lastInvocation": 1_700_000_000_500,
        "userMetrics": {
            "user_metric_length_sum": 8.0,
            "user_metric_length_count": 2.0,
            "user_metric_length_min": 3.0,
            "user_metric_length_max": 5.0,
        },
    }
    stats = function_stats(store, FQFN, 2)
    assert stats.model_dump(by_alias=True, mode="json") == {
        **busy,
        "instances": [
            {"instanceId": 0, "metrics": busy},
            {
                "instanceId": 1,
                "metrics": {
                    **idle,
                    "deadLetteredTotal": 0,
                    "1min": idle,
                    "lastInvocation": 0,
                    "userMetrics": {},
                },
            },
        ],
    }
