"""``sparkfn sources``: run a source.

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
``--source-config-file`` they override the file. The config, the output topic
and the code are checked before anything starts.

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

import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from sparkfn.cli.context import open_store
from sparkfn.cli.running import (
    Parallelism,
    Sigterm,
    StopSignals,
    config_fields,
    default_name,
    elapsed,
    load_config,
    mapping,
    note,
    stop_mode,
)
from sparkfn.cli.running import option as _field

if TYPE_CHECKING:
    from sparkfn.config.connector import SourceConfig
    from sparkfn.connectors.source_run import SourceRun

sources_app = typer.Typer(name="sources", help="Run sources.", no_args_is_help=True)

REFRESH_SECONDS = 0.2
PROGRESS_SECONDS = 5.0
# How long to wait for the instances once they were told to stop, after the
# last signal, before saying which source call holds them up.
STUCK_REPORT_SECONDS = 10.0

_SOURCE = "Source"
_OUTPUT = "Output"
_RUN = "Run"
_INTEGER_FIELDS = ("parallelism", "batch_size")


# Fields are taken as text and validated by SourceConfig, so that every bad
# value is reported the same way: the source, the field, the problem, the value.
Tenant = Annotated[str | None, _field("--tenant", "Tenant (default public).", _SOURCE, "NAME")]
Namespace = Annotated[
    str | None, _field("--namespace", "Namespace (default default).", _SOURCE, "NAME")
]
Name = Annotated[
    str | None,
    _field(
        "--name",
        "Source name (default: the last part of --classname, the --py file's name, "
        "else the --source-type).",
        _SOURCE,
        "NAME",
    ),
]
SourceType = Annotated[
    str | None,
    _field("--source-type", "A built-in source: file or generator.", _SOURCE, "TYPE"),
]
Py = Annotated[str | None, _field("--py", "The source's .py file (or .zip/.whl).", _SOURCE, "PATH")]
Classname = Annotated[
    str | None,
    _field(
        "--classname",
        "module.Name of the Source class (default: the one the --py file defines).",
        _SOURCE,
        "MODULE.NAME",
    ),
]
SourceConfigText = Annotated[
    str | None,
    _field(
        "--source-config",
        "The source's configs (what open() receives), a JSON or YAML object.",
        _SOURCE,
        "JSON",
    ),
]
Secrets = Annotated[
    str | None, _field("--secrets", "Secrets as a JSON object of strings.", _SOURCE, "JSON")
]
Output = Annotated[
    str | None,
    typer.Option(
        "--output",
        "--destination-topic-name",
        help="The topic records are appended to.",
        rich_help_panel=_OUTPUT,
        metavar="TOPIC",
    ),
]
ProcessingGuarantees = Annotated[
    str | None,
    _field(
        "--processing-guarantees",
        "at_least_once, at_most_once or effectively_once (Pulsar's ATLEAST_ONCE too).",
        _OUTPUT,
        "GUARANTEE",
    ),
]
BatchSize = Annotated[
    str | None,
    _field("--batch-size", "Records appended per transaction, at most (1000).", _OUTPUT, "N"),
]
BatchTimeout = Annotated[
    str | None,
    _field(
        "--batch-timeout",
        "How long read or emitted records may wait to be appended (100ms).",
        _OUTPUT,
        "DURATION",
    ),
]
PollInterval = Annotated[
    str | None,
    _field(
        "--poll-interval",
        "How long to wait after read() found nothing (50ms).",
        _RUN,
        "DURATION",
    ),
]


@sources_app.command("localrun")
def localrun(
    ctx: typer.Context,
    tenant: Tenant = None,
    namespace: Namespace = None,
    name: Name = None,
    source_type: SourceType = None,
    py: Py = None,
    classname: Classname = None,
    source_config: SourceConfigText = None,
    secrets: Secrets = None,
    output: Output = None,
    processing_guarantees: ProcessingGuarantees = None,
    batch_size: BatchSize = None,
    batch_timeout: BatchTimeout = None,
    poll_interval: PollInterval = None,
    parallelism: Parallelism = None,
    source_config_file: Annotated[
        Path | None,
        typer.Option(
            "--source-config-file",
            help="YAML source config (Pulsar's camelCase keys too); flags override it.",
            rich_help_panel=_SOURCE,
            metavar="PATH",
        ),
    ] = None,
    sigterm: Sigterm = "drain",
    json_status: Annotated[
        bool,
        typer.Option(
            "--json-status",
            help="Print the final status (JSON, per instance) on stdout.",
            rich_help_panel=_RUN,
        ),
    ] = False,
) -> None:
    """Run a source in this process until it ends or is stopped (Ctrl+C, SIGTERM)."""
    mode = stop_mode(sigterm)
    fields: dict[str, Any] = {
        "tenant": tenant,
        "namespace": namespace,
        "name": name,
        "source_type": source_type,
        "py": py,
        "classname": classname,
        "configs": mapping(source_config),
        "secrets": mapping(secrets),
        "output": output,
        "processing_guarantees": processing_guarantees,
        "batch_size": batch_size,
        "batch_timeout": batch_timeout,
        "poll_interval": poll_interval,
        "parallelism": parallelism,
    }
    config = build_config(fields, source_config_file)
    from sparkfn.api.errors import ConnectorFailedError
    from sparkfn.connectors.registry import load_source
    from sparkfn.connectors.source_run import SourceRun
    from sparkfn.topics.admin import TopicAdmin

    with open_store(ctx) as store:
        # Fail before starting anything: a missing topic, code that does not load.
        TopicAdmin(store).get(config.output)
        load_source(config)
        run = SourceRun(config, store)
        _run(run, mode)
        status = run.status()
        found = run.death()
    if json_status:
        sys.stdout.write(json.dumps(status.model_dump(by_alias=True, mode="json")) + "\n")
        sys.stdout.flush()
    if found is not None:
        instance_id, record = found
        death = record.death
        if death is not None:
            msg = (
                f"source {config.fqn}: instance {instance_id} died ({death.origin}, thread "
                f"{death.thread}): {death}"
            )
            raise ConnectorFailedError(msg)


# --- the config -------------------------------------------------------------------


def build_config(fields: dict[str, Any], config_file: Path | None) -> SourceConfig:
    """The source config from flags and, under them, the YAML file.

    Without a name, the source is named after the last part of its class
    name, else its file, else its built-in type.
    """
    from sparkfn.config.connector import SourceConfig
    from sparkfn.config.function import ProcessingGuarantee

    fields = config_fields(
        fields,
        integers=_INTEGER_FIELDS,
        enums={"processing_guarantees": [e.value for e in ProcessingGuarantee]},
    )
    default_name(fields, config_file, "source_type")
    return load_config(SourceConfig, fields, config_file)


# --- running --------------------------------------------------------------------


def _run(group: SourceRun, sigterm_mode: str) -> None:
    """Run the source until it ended; signals stop it, its failure policy handles deaths."""
    config = group.config
    # Deaths are reported once, as the command's error line, not also as a log record.
    for name in ("sparkfn.connectors", "sparkfn.supervisor"):
        logging.getLogger(name).addHandler(logging.NullHandler())
    signals = StopSignals(sigterm_mode)
    signals.install()
    console = Console(stderr=True, highlight=False)
    display: _LiveTable | _ProgressLines = (
        _LiveTable(console, group) if console.is_terminal else _ProgressLines(group)
    )
    try:
        what = config.source_type or config.classname or config.py
        note(
            f"starting source {config.fqn} ({what}, {config.parallelism} "
            f"instance{'s' if config.parallelism > 1 else ''}) -> {config.output}"
        )
        group.start()
        acted = 0
        stop_asked_at: float | None = None
        reported_stuck = False
        while not group.wait(0):
            signals.wake.wait(REFRESH_SECONDS)
            signals.wake.clear()
            while acted < len(signals.requests):
                mode, name = signals.requests[acted]
                acted += 1
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
                for runner in group.runners:
                    if runner.in_call:
                        note(
                            f"source {config.fqn} instance {runner.instance_id} is still in "
                            f"{runner.in_call}(); close() follows when it returns "
                            "(Ctrl+C again to give up)"
                        )
            display.update()
        group.join(1.0)
    finally:
        display.close()
        signals.restore()
    stats = group.stats
    note(
        f"source {config.fqn} {group.state.value}: received {stats.received}, "
        f"appended {stats.appended}, acked {stats.acked}, errors {stats.errors}"
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
