"""``sparkfn sources``: run a source here (``localrun``), or on a worker.

The worker commands (``create``, ``update``, ``status``, ...) are in
:mod:`sparkfn.cli.admin_connectors`.

::

    sparkfn sources localrun --source-type generator --output demo \\
        --source-config '{"count": 1000, "rate": 200}'
    sparkfn sources localrun --source-type file --output raw \\
        --source-config '{"path": "/data/in", "format": "csv"}' --parallelism 2
    sparkfn sources localrun --py lines.py --classname lines.Lines --output raw \\
        --sigterm suspend --json-status
    sparkfn sources localrun --source-config-file lines.yaml

``localrun`` runs the source's instances on threads of this process (no
Spark: a source only appends to its output topic). The flags are the fields
of the source config (Pulsar's names, kebab-case); with
``--source-config-file`` they override the file. The config, the code and
the output topic are checked before anything starts; a missing topic is
created, as a function's are, unless the store's setting says not.

Stopping: SIGTERM stops the way ``--sigterm`` says (default ``drain``); the
first Ctrl+C drains, the next stop signal cancels, one more gives up waiting
for the source (a ``read()`` that never returns). A bounded source ends by
itself (a drain). The command exits 0 when the source stopped cleanly, and 1
with an ``error [connector_failed]`` line naming the instance and the
exception when one died and the source's failure policy
(``failurePolicy`` in the YAML file) ended it: by default a source's own
exception is fatal and cancels the other instances (``on_fatal``
``SHUTDOWN_FUNCTION``); ``REPLACE_INSTANCE`` restarts the dead instance,
``SHUTDOWN_INSTANCE`` lets the others run on.

While it runs, a table of per-instance counts refreshes on stderr (a plain
progress line every few seconds when stderr is not a terminal); stdout only
carries ``--json-status``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.live import Live
from rich.table import Table

from sparkfn.cli.admin_connectors import add_connector_commands
from sparkfn.cli.configs import connector_config
from sparkfn.cli.context import console, note, open_store
from sparkfn.cli.flags import takes
from sparkfn.cli.localrun import SOURCE_LOCALRUN
from sparkfn.cli.params import elapsed
from sparkfn.cli.running import StopSignals, finish

if TYPE_CHECKING:
    from rich.console import Console

    from sparkfn.connectors.source.source_run import SourceRun

sources_app = typer.Typer(
    name="sources", help="Run sources here, or on a worker.", no_args_is_help=True
)
add_connector_commands(sources_app, "source")

REFRESH_SECONDS = 0.2
PROGRESS_SECONDS = 5.0
# How long to wait for the instances once they were told to stop, after the
# last signal, before saying which source call holds them up.
STUCK_REPORT_SECONDS = 10.0


@sources_app.command("localrun")
@takes("source", SOURCE_LOCALRUN)
def localrun(
    ctx: typer.Context,
    fields: dict[str, Any],
    *,
    config_file: Path | None,
    sigterm: str,
    json_status: bool,
) -> None:
    """Run a source in this process until it ends or is stopped (Ctrl+C, SIGTERM)."""
    from sparkfn.api.errors import ConnectorFailedError
    from sparkfn.connectors.registry import load_source
    from sparkfn.connectors.source.source_run import SourceRun
    from sparkfn.runtime.query.build import check_topics_exist
    from sparkfn.topics.autocreate import TopicCreation

    config, warnings = connector_config("source", fields, config_file)
    for warning in warnings:
        note(f"warning: {warning}")
    with open_store(ctx) as store:
        # Fail before starting anything: code that does not load, a missing topic where
        # the store does not create it on first use (checked last: a refused source makes none).
        load_source(config)
        output = [("topicName", config.output)]
        check_topics_exist(store, f"source {config.fqn}", output, TopicCreation.read(store))
        run = SourceRun(config, store)
        _run(run, sigterm)
        status = run.status()
        found = run.death()
    failure: Exception | None = None
    if found is not None and (death := found[1].death) is not None:
        msg = (
            f"source {config.fqn}: instance {found[0]} died ({death.origin}, thread "
            f"{death.thread}): {death}"
        )
        failure = ConnectorFailedError(msg)
    finish(status, failure, json_status=json_status)


# --- running --------------------------------------------------------------------


def _run(group: SourceRun, sigterm_mode: str) -> None:
    """Run the source until it ended; signals stop it, its failure policy handles deaths."""
    config = group.config
    # Deaths are reported once, as the command's error line, not also as a log record.
    for name in ("sparkfn.connectors", "sparkfn.supervisor"):
        logging.getLogger(name).addHandler(logging.NullHandler())
    with StopSignals(sigterm_mode) as signals:
        shown = console(stderr=True)
        display: _LiveTable | _ProgressLines = (
            _LiveTable(shown, group) if shown.is_terminal else _ProgressLines(group)
        )
        try:
            what = config.source_type or config.classname or config.py
            note(
                f"starting source {config.fqn} ({what}, {config.parallelism} "
                f"instance{'s' if config.parallelism > 1 else ''}) -> {config.output}"
            )
            group.start()
            stop_asked_at: float | None = None
            reported_stuck = False
            while not group.wait(0):
                for mode, name in signals.next_requests(REFRESH_SECONDS):
                    note(f"stopping source {config.fqn}: {mode} ({name})")
                    group.stop(mode, f"{mode} on {name}")
                    stop_asked_at = time.monotonic()
                    reported_stuck = False
                if (
                    stop_asked_at is not None
                    and not reported_stuck
                    and time.monotonic() - stop_asked_at > STUCK_REPORT_SECONDS
                ):
                    reported_stuck = True
                    _report_stuck(group)
                display.update()
            group.join(1.0)
        finally:
            display.close()
    stats = group.stats
    note(
        f"source {config.fqn} {group.state.value}: received {stats.received}, "
        f"appended {stats.appended}, acked {stats.acked}, errors {stats.errors}"
    )


def _report_stuck(group: SourceRun) -> None:
    """Name the source calls that keep stopped instances from ending."""
    for runner in group.runners:
        if runner.in_call:
            note(
                f"source {group.config.fqn} instance {runner.instance_id} is still in "
                f"{runner.in_call}(); close() follows when it returns "
                "(Ctrl+C again to give up)"
            )


class _LiveTable:
    """Per-instance counts in a table redrawn in place on a terminal."""

    def __init__(self, console: Console, group: SourceRun) -> None:
        self.group = group
        self.started = time.monotonic()
        self.last = 0.0
        self.live = Live(console=console, auto_refresh=False, transient=False)
        self.live.start()

    def update(self) -> None:
        now = time.monotonic()
        if now - self.last >= 1.0:
            self.last = now
            self.live.update(self._table(), refresh=True)

    def close(self) -> None:
        if self.live.is_started:
            self.live.update(self._table(), refresh=True)
            self.live.stop()

    def _table(self) -> Table:
        config = self.group.config
        table = Table(
            "INSTANCE",
            "STATE",
            "RECEIVED",
            "APPENDED",
            "ACKED",
            "ERRORS",
            title=f"{config.fqn} -> {config.output}  up {elapsed(self.started)}",
            title_justify="left",
        )
        for runner in self.group.runners:
            s = runner.stats
            table.add_row(
                str(runner.instance_id),
                runner.state.value,
                str(s.received),
                str(s.appended),
                str(s.acked),
                str(s.errors),
            )
        return table


class _ProgressLines:
    """One line of totals every few seconds while they change, for logs and pipes."""

    def __init__(self, group: SourceRun) -> None:
        self.group = group
        self.started = time.monotonic()
        self.last_at = time.monotonic()
        self.last_counts: tuple[int, ...] = (0, 0, 0)

    def update(self) -> None:
        now = time.monotonic()
        if now - self.last_at < PROGRESS_SECONDS:
            return
        self.last_at = now
        stats = self.group.stats
        counts = (stats.received, stats.appended, stats.errors)
        if counts != self.last_counts:
            self.last_counts = counts
            note(
                f"[{elapsed(self.started)}] {self.group.config.fqn} {self.group.state.value}: "
                f"received {stats.received}, appended {stats.appended}, errors {stats.errors}"
            )

    def close(self) -> None:
        """The final line is the command's."""
