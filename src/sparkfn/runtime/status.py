"""Function status and stats in Pulsar's JSON shapes, from the store.

``function_status`` follows Pulsar's ``FunctionStatus`` (per instance:
``running``, ``error``, ``numRestarts``, ``numReceived``,
``numSuccessfullyProcessed``, ``numUserExceptions``, ``latestUserExceptions``,
``numSystemExceptions``, ``latestSystemExceptions``, ``averageLatency``,
``lastInvocationTime``, ``workerId``) extended with ``state``,
``deathException`` (type, message, traceback, origin, thread),
``numFatalExceptions`` and, at the top, the function's ``state`` and
``unclosedObjects`` (user objects a stop could not close in time). ``function_stats`` follows ``FunctionStatsImpl``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkfn.runtime import control
from sparkfn.runtime.metrics_store import instance_recent, instance_totals, latest_exceptions
from sparkfn.store.store import Store


def _average(total: dict[str, Any]) -> float:
    count = total.get("latency_count") or 0
    return float(total.get("latency_ms_sum") or 0.0) / count if count else 0.0


def function_status(
    store: Store,
    fqfn: str,
    parallelism: int,
    *,
    unclosed: Sequence[str] = (),
    control_id: str | None = None,
) -> dict[str, Any]:
    """Pulsar's ``FunctionStatus`` JSON for ``fqfn``.

    ``control_id`` names its lifecycle record (default ``fqfn``, a
    function's; see :func:`sparkfn.runtime.control.control_id`).
    """
    totals = instance_totals(store, fqfn)
    exceptions = latest_exceptions(store, fqfn)
    record = control.read_control(store, control_id or fqfn)
    runs = record.instances if record is not None else {}
    instances: list[dict[str, Any]] = []
    for instance_id in range(parallelism):
        total = totals.get(instance_id, {})
        run = runs.get(instance_id)
        state = run.state if run is not None else control.CREATED
        death = run.death if run is not None and state == control.ERROR else None
        error = str(death) if death else (run.cause if run and state == control.ERROR else "")
        instances.append(
            {
                "instanceId": instance_id,
                "status": {
                    "running": state in (control.RUNNING, control.STOPPING),
                    "error": error,
                    "numRestarts": run.restarts if run is not None else 0,
                    "numReceived": int(total.get("received", 0)),
                    "numSuccessfullyProcessed": int(total.get("processed_successfully", 0)),
                    "numUserExceptions": int(total.get("user_exceptions", 0)),
                    "latestUserExceptions": exceptions.get((instance_id, "user"), []),
                    "numSystemExceptions": int(total.get("system_exceptions", 0)),
                    "latestSystemExceptions": exceptions.get((instance_id, "system"), []),
                    "numFatalExceptions": run.fatal_exceptions if run is not None else 0,
                    "numDeadLettered": int(total.get("dead_lettered", 0)),
                    "averageLatency": _average(total),
                    "lastInvocationTime": int(total.get("last_invocation_ms") or 0),
                    "workerId": "localrun",
                    "state": state,
                    "deathException": (
                        {
                            "type": death.type,
                            "message": death.message,
                            "traceback": death.traceback,
                            "origin": death.origin,
                            "thread": death.thread,
                        }
                        if death
                        else None
                    ),
                },
            }
        )
    return {
        "name": fqfn,
        "state": record.state if record is not None else control.CREATED,
        "numInstances": parallelism,
        "numRunning": sum(1 for i in instances if i["status"]["running"]),
        "numRestarts": sum(i["status"]["numRestarts"] for i in instances),
        "unclosedObjects": list(unclosed),
        "instances": instances,
    }


def _metrics(total: dict[str, Any], recent: dict[str, Any]) -> dict[str, Any]:
    return {
        "receivedTotal": int(total.get("received", 0)),
        "processedSuccessfullyTotal": int(total.get("processed_successfully", 0)),
        "systemExceptionsTotal": int(total.get("system_exceptions", 0)),
        "userExceptionsTotal": int(total.get("user_exceptions", 0)),
        "deadLetteredTotal": int(total.get("dead_lettered", 0)),
        "avgProcessLatency": _average(total),
        "1min": {
            "receivedTotal": int(recent.get("received", 0)),
            "processedSuccessfullyTotal": int(recent.get("processed_successfully", 0)),
            "systemExceptionsTotal": int(recent.get("system_exceptions", 0)),
            "userExceptionsTotal": int(recent.get("user_exceptions", 0)),
            "avgProcessLatency": _average(recent),
        },
        "lastInvocation": int(total.get("last_invocation_ms") or 0),
        "userMetrics": {
            name: {"count": m.count, "sum": m.sum, "min": m.min, "max": m.max}
            for name, m in total.get("user_metrics", {}).items()
        },
    }


def function_stats(store: Store, fqfn: str, parallelism: int) -> dict[str, Any]:
    """Pulsar's ``FunctionStats`` JSON: totals, 1-minute variants, per instance."""
    totals = instance_totals(store, fqfn)
    recent = instance_recent(store, fqfn)
    per_instance = [
        {"instanceId": i, "metrics": _metrics(totals.get(i, {}), recent.get(i, {}))}
        for i in range(parallelism)
    ]
    whole: dict[str, Any] = {}
    keys = (
        "received",
        "processed_successfully",
        "user_exceptions",
        "system_exceptions",
        "dead_lettered",
    )
    for key in (*keys, "latency_ms_sum", "latency_count"):
        whole[key] = sum(t.get(key, 0) or 0 for t in totals.values())
    whole["last_invocation_ms"] = max(
        (t.get("last_invocation_ms") or 0 for t in totals.values()), default=0
    )
    merged_metrics: dict[str, Any] = {}
    for t in totals.values():
        for name, m in t.get("user_metrics", {}).items():
            merged_metrics.setdefault(name, type(m)()).merge(m)
    whole["user_metrics"] = merged_metrics
    whole_recent: dict[str, Any] = {}
    for r in recent.values():
        for key, value in r.items():
            whole_recent[key] = whole_recent.get(key, 0) + (value or 0)
    return {**_metrics(whole, whole_recent), "instances": per_instance}
