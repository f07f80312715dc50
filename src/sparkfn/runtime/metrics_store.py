"""Committing per-instance stats with each batch, and reading them back.

Lifetime totals live in ``function_instance_stats``; one row per instance per
batch in ``function_batch_stats`` (kept five minutes) gives the 1-minute
variants; ``function_exceptions`` keeps the latest exceptions per instance.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, func, insert, select, update

from sparkfn.api.status import ExceptionInformation
from sparkfn.runtime.stats import (
    LATEST_EXCEPTIONS_KEPT,
    ExceptionInfo,
    InstanceStats,
    MetricSummary,
)
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store

_TOTALS = schema.function_instance_stats
_RECENT = schema.function_batch_stats
_EXC = schema.function_exceptions
RECENT_KEPT = timedelta(minutes=5)
# The counts kept both as lifetime totals and per batch (for the 1-minute variants).
_COUNTS = (
    "received",
    "processed_successfully",
    "user_exceptions",
    "system_exceptions",
    "latency_ms_sum",
    "latency_count",
)
_TOTAL_COUNTS = (*_COUNTS, "dead_lettered")  # kept as lifetime totals only


def commit_stats(
    conn: Connection, fqfn: str, per_instance: Sequence[tuple[int, InstanceStats]]
) -> None:
    """Add one batch's stats, inside the batch's transaction."""
    commit_stats_many(conn, [(fqfn, per_instance)])


def commit_stats_many(
    conn: Connection, batches: Sequence[tuple[str, Sequence[tuple[int, InstanceStats]]]]
) -> None:
    """Add one batch's stats of several runs (a query group's members) in a few statements.

    One SELECT of the runs' totals, then each kind of write as one
    executemany, whatever the number of runs: a group's commit of 200
    members spent a third of its time here when each took four statements.
    """
    now = utc_now()
    merged: dict[tuple[str, int], InstanceStats] = {}
    for fqfn, per_instance in batches:
        for instance_id, stats in per_instance:
            merged.setdefault((fqfn, instance_id), InstanceStats()).merge(stats)
    if not merged:
        return
    names = sorted({fqfn for fqfn, _ in merged})
    found = {
        (r.fqfn, r.instance_id): r
        for r in conn.execute(select(_TOTALS).where(_TOTALS.c.fqfn.in_(names)))
    }
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    recent: list[dict[str, Any]] = []
    exceptions: list[dict[str, Any]] = []
    raised: set[tuple[str, int]] = set()  # instances with new exceptions, to trim
    for (fqfn, instance_id), stats in sorted(merged.items()):
        counts = _counts(stats, _TOTAL_COUNTS)
        row = found.get((fqfn, instance_id))
        if row is None:
            inserts.append(
                {
                    "fqfn": fqfn,
                    "instance_id": instance_id,
                    **counts,
                    "last_invocation_ms": stats.last_invocation_ms,
                    "user_metrics": _dump_metrics(stats.user_metrics),
                    "batches": 1,
                    "updated_at": now,
                }
            )
        else:
            metrics = _load_metrics(row.user_metrics)
            for name, summary in stats.user_metrics.items():
                metrics.setdefault(name, MetricSummary()).merge(summary)
            updates.append(
                {
                    "k_fqfn": fqfn,
                    "k_instance": instance_id,
                    **{f"d_{name}": value for name, value in counts.items()},
                    "v_last": stats.last_invocation_ms or row.last_invocation_ms,
                    "v_metrics": _dump_metrics(metrics),
                    "v_now": now,
                }
            )
        recent.append(
            {
                "fqfn": fqfn,
                "instance_id": instance_id,
                "committed_at": now,
                **_counts(stats, _COUNTS),
            }
        )
        if stats.latest_exceptions:
            raised.add((fqfn, instance_id))
        exceptions += [
            {
                "fqfn": fqfn,
                "instance_id": instance_id,
                "kind": e.kind,
                "type": e.type,
                "message": e.message,
                "traceback": e.traceback,
                "message_id": e.message_id,
                "timestamp_ms": e.timestamp_ms,
            }
            for e in stats.latest_exceptions
        ]
    if inserts:
        conn.execute(insert(_TOTALS), inserts)
    if updates:
        conn.execute(_ADD_TOTALS, updates)
    conn.execute(insert(_RECENT), recent)
    if exceptions:
        conn.execute(insert(_EXC), exceptions)
        for fqfn, instance_id in sorted(raised):
            _trim_exceptions(conn, fqfn, instance_id)
    conn.execute(
        delete(_RECENT).where(
            and_(_RECENT.c.fqfn.in_(names), _RECENT.c.committed_at < now - RECENT_KEPT)
        )
    )


# One run instance's batch added to its totals (commit_stats_many's executemany).
_ADD_TOTALS = (
    update(_TOTALS)
    .where(
        and_(
            _TOTALS.c.fqfn == bindparam("k_fqfn"), _TOTALS.c.instance_id == bindparam("k_instance")
        )
    )
    .values(
        **{name: _TOTALS.c[name] + bindparam(f"d_{name}") for name in _TOTAL_COUNTS},
        last_invocation_ms=bindparam("v_last"),
        user_metrics=bindparam("v_metrics"),
        batches=_TOTALS.c.batches + 1,
        updated_at=bindparam("v_now"),
    )
)


def _trim_exceptions(conn: Connection, fqfn: str, instance_id: int) -> None:
    for kind in ("user", "system"):
        where = and_(_EXC.c.fqfn == fqfn, _EXC.c.instance_id == instance_id, _EXC.c.kind == kind)
        keep = (
            select(_EXC.c.id).where(where).order_by(_EXC.c.id.desc()).limit(LATEST_EXCEPTIONS_KEPT)
        )
        keep_ids = list(conn.execute(keep).scalars())
        if keep_ids:
            conn.execute(delete(_EXC).where(and_(where, _EXC.c.id.not_in(keep_ids))))


def _counts(stats: InstanceStats, names: Sequence[str]) -> dict[str, Any]:
    return {name: getattr(stats, name) for name in names}


def _dump_metrics(metrics: dict[str, MetricSummary]) -> str:
    return json.dumps({name: asdict(m) for name, m in metrics.items()})


def _load_metrics(text: str) -> dict[str, MetricSummary]:
    return {name: MetricSummary(**values) for name, values in json.loads(text or "{}").items()}


def reset_stats(store: Store, fqfn: str, instance_id: int | None = None) -> None:
    """Forget the stats of ``fqfn`` (one instance's, or all): a restart starts them
    from zero, as Pulsar's restarted instances do."""
    with store.write() as conn:
        for table in (_TOTALS, _RECENT, _EXC):
            where = table.c.fqfn == fqfn
            if instance_id is not None:
                where = and_(where, table.c.instance_id == instance_id)
            conn.execute(delete(table).where(where))


def instance_totals(store: Store, fqfn: str) -> dict[int, dict[str, Any]]:
    """Lifetime totals per instance id."""
    with store.read() as conn:
        rows = conn.execute(select(_TOTALS).where(_TOTALS.c.fqfn == fqfn)).all()
    out = {}
    for row in rows:
        data = dict(row._mapping)  # noqa: SLF001 - public SQLAlchemy Row API
        data["user_metrics"] = _load_metrics(row.user_metrics)
        out[row.instance_id] = data
    return out


def instance_recent(
    store: Store, fqfn: str, window: timedelta = timedelta(minutes=1)
) -> dict[int, dict[str, Any]]:
    """Per instance sums over the last ``window`` (the ``1min`` variants)."""
    since = utc_now() - window
    with store.read() as conn:
        rows = conn.execute(
            select(_RECENT.c.instance_id, *[func.sum(_RECENT.c[c]).label(c) for c in _COUNTS])
            .where(and_(_RECENT.c.fqfn == fqfn, _RECENT.c.committed_at >= since))
            .group_by(_RECENT.c.instance_id)
        ).all()
    # PostgreSQL's SUM of an integer column is a Decimal: convert back.
    return {
        r.instance_id: {
            c: (float if c == "latency_ms_sum" else int)(getattr(r, c) or 0) for c in _COUNTS
        }
        for r in rows
    }


def latest_exceptions(store: Store, fqfn: str) -> dict[tuple[int, str], list[ExceptionInformation]]:
    """``{(instance, kind): [exception, ...]}`` newest last."""
    with store.read() as conn:
        rows = conn.execute(select(_EXC).where(_EXC.c.fqfn == fqfn).order_by(_EXC.c.id)).all()
    out: dict[tuple[int, str], list[ExceptionInformation]] = {}
    for r in rows:
        info = ExceptionInfo(r.kind, r.type, r.message, r.traceback, r.message_id, r.timestamp_ms)
        out.setdefault((r.instance_id, r.kind), []).append(info.as_status())
    return out
