"""Function status and stats, read from the store, as :mod:`sparkfn.api.status` models.

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
from typing import Any, TypedDict, TypeVar

from sparkfn.api.lifecycle import RunState
from sparkfn.api.status import (
    DeathException,
    FunctionInstanceStats,
    FunctionInstanceStatsData,
    FunctionInstanceStatsDataBase,
    FunctionInstanceStatus,
    FunctionInstanceStatusData,
    FunctionStats,
    FunctionStatus,
    UserMetricSummary,
)
from sparkfn.runtime.lifecycle import control
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
    worker_id: str = "localrun",
    control_id: str | None = None,
) -> FunctionStatus:
    """Pulsar's ``FunctionStatus`` for ``fqfn``.

    ``control_id`` names its lifecycle record and stats (default ``fqfn``, a
    function's; see :func:`sparkfn.runtime.lifecycle.control.control_id`).
    """
    key = control_id or fqfn
    totals = instance_totals(store, key)
    exceptions = latest_exceptions(store, key)
    record = control.read_control(store, key)
    runs = record.instances if record is not None else {}
    instances: list[FunctionInstanceStatus] = []
    for instance_id in range(parallelism):
        total = totals.get(instance_id, {})
        run = runs.get(instance_id)
        state = run.state if run is not None else control.CREATED
        death = run.death if run is not None and state == control.ERROR else None
        error = str(death) if death else (run.cause if run and state == control.ERROR else "")
        status = FunctionInstanceStatusData(
            running=state in (control.RUNNING, control.STOPPING),
            error=error,
            num_restarts=run.restarts if run is not None else 0,
            num_received=int(total.get("received", 0)),
            num_successfully_processed=int(total.get("processed_successfully", 0)),
            num_user_exceptions=int(total.get("user_exceptions", 0)),
            latest_user_exceptions=exceptions.get((instance_id, "user"), []),
            num_system_exceptions=int(total.get("system_exceptions", 0)),
            latest_system_exceptions=exceptions.get((instance_id, "system"), []),
            num_fatal_exceptions=run.fatal_exceptions if run is not None else 0,
            num_dead_lettered=int(total.get("dead_lettered", 0)),
            average_latency=_average(total),
            last_invocation_time=int(total.get("last_invocation_ms") or 0),
            worker_id=worker_id,
            state=RunState(state),
            death_exception=DeathException.of(death),
        )
        instances.append(FunctionInstanceStatus(instance_id=instance_id, status=status))
    return FunctionStatus(
        name=fqfn,
        state=RunState(record.state) if record is not None else control.CREATED,
        num_instances=parallelism,
        num_running=sum(1 for i in instances if i.status.running),
        num_restarts=sum(i.status.num_restarts for i in instances),
        unclosed_objects=list(unclosed),
        instances=instances,
    )


class _Counts(TypedDict):
    """The counters kept both in total and over the last minute."""

    received_total: int
    processed_successfully_total: int
    system_exceptions_total: int
    user_exceptions_total: int
    avg_process_latency: float


def _counts(total: dict[str, Any]) -> _Counts:
    return {
        "received_total": int(total.get("received", 0)),
        "processed_successfully_total": int(total.get("processed_successfully", 0)),
        "system_exceptions_total": int(total.get("system_exceptions", 0)),
        "user_exceptions_total": int(total.get("user_exceptions", 0)),
        "avg_process_latency": _average(total),
    }


_Data = TypeVar("_Data", bound=FunctionInstanceStatsData)


def _metrics(cls: type[_Data], total: dict[str, Any], recent: dict[str, Any]) -> _Data:
    return cls(
        **_counts(total),
        dead_lettered_total=int(total.get("dead_lettered", 0)),
        one_min=FunctionInstanceStatsDataBase(**_counts(recent)),
        last_invocation=int(total.get("last_invocation_ms") or 0),
        user_metrics={
            name: UserMetricSummary(count=m.count, sum=m.sum, min=m.min, max=m.max)
            for name, m in total.get("user_metrics", {}).items()
        },
    )


def function_stats(
    store: Store, fqfn: str, parallelism: int, *, control_id: str | None = None
) -> FunctionStats:
    """Pulsar's ``FunctionStats``: totals, 1-minute variants, per instance.

    ``control_id`` names the run whose stats they are (default ``fqfn``, a function's).
    """
    key = control_id or fqfn
    totals = instance_totals(store, key)
    recent = instance_recent(store, key)
    per_instance = [
        FunctionInstanceStats(
            instance_id=i,
            metrics=_metrics(FunctionInstanceStatsData, totals.get(i, {}), recent.get(i, {})),
        )
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
    stats = _metrics(FunctionStats, whole, whole_recent)
    return stats.model_copy(update={"instances": per_instance})
