"""``sparkfn functions status|stats``: how a worker's function is doing, per instance.

::

    sparkfn functions status --name wordcount
    sparkfn functions status --name wordcount --watch          # live, until Ctrl+C
    sparkfn functions stats --fqfn public/default/wordcount --instance-id 0 --output json

``status`` is Pulsar's ``FunctionStatus`` (state, running instances, each
instance's counts and errors), ``stats`` its ``FunctionStats`` (totals, the
last minute's, user metrics). With ``--watch``, ``status`` redraws its table
every second on a terminal (with ``--output json``, prints each new status as
one line) until Ctrl+C.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sparkfn.cli.admin_client import (
    CONNECTION_PULSAR,
    INSTANCE_ID,
    TARGET,
    AdminClient,
    Call,
    changes,
    show,
    switch,
    table_console,
)
from sparkfn.cli.context import emit_json
from sparkfn.cli.flags import takes
from sparkfn.cli.progress import COUNT_COLUMNS, status_table

WATCH = switch("--watch", "-w", "Show the status live, every second, until Ctrl+C.")


def status(
    ctx: typer.Context,
    fields: dict[str, Any],
    *,
    instance_id: int | None,
    watch: bool,
    **given: Any,
) -> None:
    """Show a function's status: its state and each instance's counts and errors."""
    call = Call.of(given)
    path = f"{call.path}/status" if instance_id is None else f"{call.path}/{instance_id}/status"
    with call.client() as client:
        if not watch:
            show(call, client.json("GET", path), lambda body: _status_view(call, body, instance_id))
            return
        try:
            _watch(call, client, path, instance_id)
        except KeyboardInterrupt:
            return  # Ctrl+C is how a watch ends


def _watch(call: Call, client: AdminClient, path: str, instance_id: int | None) -> None:
    statuses = changes(lambda: client.json("GET", path))
    if call.json:
        for body in statuses:
            emit_json(body)
        return
    with Live(console=table_console(), auto_refresh=False) as live:
        for body in statuses:
            live.update(_status_view(call, body, instance_id), refresh=True)


def _status_view(call: Call, body: dict[str, Any], instance_id: int | None) -> RenderableType:
    from sparkfn.api.status import (
        FunctionInstanceStatus,
        FunctionInstanceStatusData,
        FunctionStatus,
    )

    if instance_id is not None:
        data = FunctionInstanceStatusData.model_validate(body)
        one = FunctionInstanceStatus(instance_id=instance_id, status=data)
        whole = FunctionStatus(name=call.fqfn, num_instances=1, instances=[one])
        title = f"function {call.fqfn}, instance {instance_id}"
    else:
        whole = FunctionStatus.model_validate(body)
        title = (
            f"function {whole.name}: {whole.state.value}, {whole.num_running} of "
            f"{whole.num_instances} instance(s) running, {whole.num_restarts} restart(s)"
        )
    problems = []
    for instance in whole.instances:
        found = instance.status
        where = f"instance {instance.instance_id}"
        if found.error:
            problems.append(Text(f"{where}: {found.error}", style="red"))
        if found.death_exception is not None:
            death = found.death_exception
            problems.append(Text(f"{where} died: {death.type}: {death.message}", style="red"))
        for exc in found.latest_user_exceptions[-3:]:
            problems.append(Text(f"{where} user exception: {exc.exception_string}"))
    for unclosed in whole.unclosed_objects:
        problems.append(Text(f"not closed in time: {unclosed}", style="yellow"))
    return Group(status_table(whole, title), *problems)


def stats(
    ctx: typer.Context, fields: dict[str, Any], *, instance_id: int | None, **given: Any
) -> None:
    """Show a function's stats: totals, the last minute's and user metrics, per instance."""
    call = Call.of(given)
    path = f"{call.path}/stats" if instance_id is None else f"{call.path}/{instance_id}/stats"
    with call.client() as client:
        body = client.json("GET", path)
    show(call, body, lambda body: _stats_view(call, body, instance_id))


def _stats_view(call: Call, body: dict[str, Any], instance_id: int | None) -> RenderableType:
    from sparkfn.api.status import FunctionInstanceStats, FunctionInstanceStatsData, FunctionStats

    if instance_id is None:
        whole = FunctionStats.model_validate(body)
        rows = [(str(i.instance_id), i.metrics) for i in whole.instances]
        rows.append(("total", whole))
    else:
        data = FunctionInstanceStatsData.model_validate(body)
        whole = FunctionStats(
            instances=[FunctionInstanceStats(instance_id=instance_id, metrics=data)]
        )
        rows = [(str(instance_id), data)]
    table = Table(
        "INSTANCE",
        *COUNT_COLUMNS,
        "PROCESSED 1 MIN",
        title=f"function {call.fqfn} stats",
        title_justify="left",
    )
    for label, data in rows:
        table.add_row(
            label,
            str(data.received_total),
            str(data.processed_successfully_total),
            str(data.user_exceptions_total),
            str(data.system_exceptions_total),
            str(data.dead_lettered_total),
            f"{data.avg_process_latency:.3f} ms",
            str(data.one_min.processed_successfully_total),
        )
    metrics = Table("INSTANCE", "USER METRIC", "COUNT", "SUM", "MIN", "MAX")
    for instance in whole.instances:
        for name, summary in sorted(instance.metrics.user_metrics.items()):
            metrics.add_row(
                str(instance.instance_id),
                name,
                str(summary.count),
                f"{summary.sum:g}",
                "-" if summary.min is None else f"{summary.min:g}",
                "-" if summary.max is None else f"{summary.max:g}",
            )
    return Group(table, metrics) if metrics.row_count else table


def add_commands(app: typer.Typer) -> None:
    """Add ``status`` and ``stats`` to the ``functions`` group ``app``."""
    # As pulsar-admin, JSON by default (--output table: tables).
    status_flags = (*TARGET, INSTANCE_ID, WATCH, *CONNECTION_PULSAR)
    app.command("status")(takes("function", status_flags)(status))
    app.command("stats")(takes("function", (*TARGET, INSTANCE_ID, *CONNECTION_PULSAR))(stats))
