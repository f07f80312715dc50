"""``sparkfn sinks``: run a sink.

::

    sparkfn sinks localrun --sink-type file --inputs orders \\
        --configs '{"path": "/data/orders-{instance}.jsonl"}' --parallelism 2
    sparkfn sinks localrun --py archive.py --inputs raw --subscription-position earliest \\
        --until-drained --json-status
    sparkfn sinks localrun --sink-config-file archive.yaml --sigterm suspend

``localrun`` runs the sink's Spark query in this process, on ``local[*]`` or
``--spark-master``: the sink runs as a function whose only object is the
sink (:mod:`sparkfn.connectors.sink_runtime`). The flags are the fields of
the sink config (Pulsar's names, kebab-case; ``--configs`` is also
``--sink-config``); with ``--sink-config-file`` they override the file. The
config, the input topics and the sink's code are checked before Spark starts.

Stopping: SIGTERM stops the way ``--sigterm`` says (default ``drain``); the
first Ctrl+C drains, the next stop signal cancels. With ``--until-drained`` the command ends when the input present at
start is written. It exits 0 when the sink stopped cleanly, and 1 with one
``error [connector_failed]`` line naming the sink and the exception when it
died (an exception from the sink, or ``context.fatal``).

While it runs, the same table of per-instance counts as ``functions
localrun`` refreshes on stderr (``PROCESSED`` counts records written);
stdout only carries ``--json-status``.
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from sparkfn.cli.context import open_store
from sparkfn.cli.functions import REFRESH_SECONDS, progress_display
from sparkfn.cli.running import (
    FailurePolicyOption,
    Parallelism,
    Sigterm,
    SparkMaster,
    StopSignals,
    TriggerInterval,
    config_fields,
    default_name,
    load_config,
    mapping,
    note,
    run_query,
    split_topics,
    stop_mode,
)
from sparkfn.cli.running import option as _field

if TYPE_CHECKING:
    from sparkfn.api.status import FunctionStatus
    from sparkfn.config.connector import SinkConfig
    from sparkfn.connectors.sink_run import SinkRun

sinks_app = typer.Typer(name="sinks", help="Run sinks.", no_args_is_help=True)

_SINK = "Sink"
_INPUT = "Input"
_RUN = "Run"
_INTEGER_FIELDS = ("parallelism", "max_records_per_batch")


# Fields are taken as text and validated by SinkConfig, so that every bad
# value is reported the same way: the sink, the field, the problem, the value.
Tenant = Annotated[str | None, _field("--tenant", "Tenant (default public).", _SINK, "NAME")]
Namespace = Annotated[
    str | None, _field("--namespace", "Namespace (default default).", _SINK, "NAME")
]
Name = Annotated[
    str | None,
    _field(
        "--name",
        "Sink name (default: the last part of --classname, the --py file's name, "
        "else the --sink-type).",
        _SINK,
        "NAME",
    ),
]
SinkType = Annotated[
    str | None,
    _field("--sink-type", "A built-in sink: file, postgres or stdout.", _SINK, "TYPE"),
]
Py = Annotated[str | None, _field("--py", "The sink's .py file (or .zip/.whl).", _SINK, "PATH")]
Classname = Annotated[
    str | None,
    _field(
        "--classname",
        "module.Name of the Sink class (default: the one the --py file defines).",
        _SINK,
        "MODULE.NAME",
    ),
]
Configs = Annotated[
    str | None,
    typer.Option(
        "--configs",
        "--sink-config",
        help="The sink's configs (what open() receives), a JSON or YAML object.",
        rich_help_panel=_SINK,
        metavar="JSON",
    ),
]
Secrets = Annotated[
    str | None, _field("--secrets", "Secrets as a JSON object of strings.", _SINK, "JSON")
]
Inputs = Annotated[
    list[str] | None,
    typer.Option(
        "--inputs",
        help="Input topics, comma-separated; may be repeated.",
        rich_help_panel=_INPUT,
        metavar="TOPICS",
    ),
]
SubscriptionPosition = Annotated[
    str | None,
    _field(
        "--subscription-position",
        "Where a new subscription starts: earliest (default) or latest.",
        _INPUT,
        "POSITION",
    ),
]
ProcessingGuarantees = Annotated[
    str | None,
    _field(
        "--processing-guarantees",
        "at_least_once, at_most_once or effectively_once (Pulsar's ATLEAST_ONCE too).",
        _INPUT,
        "GUARANTEE",
    ),
]
MaxRecordsPerBatch = Annotated[
    str | None,
    _field("--max-records-per-batch", "Cap on the records of one micro-batch.", _RUN, "N"),
]


@sinks_app.command("localrun")
def localrun(
    ctx: typer.Context,
    tenant: Tenant = None,
    namespace: Namespace = None,
    name: Name = None,
    sink_type: SinkType = None,
    py: Py = None,
    classname: Classname = None,
    configs: Configs = None,
    secrets: Secrets = None,
    inputs: Inputs = None,
    subscription_position: SubscriptionPosition = None,
    processing_guarantees: ProcessingGuarantees = None,
    parallelism: Parallelism = None,
    max_records_per_batch: MaxRecordsPerBatch = None,
    trigger_interval: TriggerInterval = None,
    failure_policy: FailurePolicyOption = None,
    sink_config_file: Annotated[
        Path | None,
        typer.Option(
            "--sink-config-file",
            help="YAML sink config (Pulsar's camelCase keys too); flags override it.",
            rich_help_panel=_SINK,
            metavar="PATH",
        ),
    ] = None,
    until_drained: Annotated[
        bool,
        typer.Option(
            "--until-drained",
            help="Write what the inputs hold now, then stop (exit 1 if the sink failed).",
            rich_help_panel=_RUN,
        ),
    ] = False,
    sigterm: Sigterm = "drain",
    spark_master: SparkMaster = "local[*]",
    json_status: Annotated[
        bool,
        typer.Option(
            "--json-status",
            help="Print the final status (Pulsar-shaped JSON, per instance) on stdout.",
            rich_help_panel=_RUN,
        ),
    ] = False,
) -> None:
    """Run a sink in this process until it is stopped (or, with --until-drained, until done)."""
    mode = stop_mode(sigterm)
    fields: dict[str, Any] = {
        "tenant": tenant,
        "namespace": namespace,
        "name": name,
        "sink_type": sink_type,
        "py": py,
        "classname": classname,
        "configs": mapping(configs),
        "secrets": mapping(secrets),
        "inputs": split_topics(inputs),
        "subscription_position": subscription_position,
        "processing_guarantees": processing_guarantees,
        "parallelism": parallelism,
        "max_records_per_batch": max_records_per_batch,
        "trigger_interval": trigger_interval,
        "failure_policy": mapping(failure_policy),
    }
    config = build_config(fields, sink_config_file)
    from sparkfn.connectors.sink_run import SinkRun, validate_sink

    with open_store(ctx) as store:
        # Fail before paying for a JVM: a missing topic, code that does not load.
        validate_sink(store, config)
        run = SinkRun(config, store=store, spark_master=spark_master)
        status, failure = _run(run, mode, until_drained=until_drained)
    if json_status:
        sys.stdout.write(json.dumps(status.model_dump(by_alias=True, mode="json")) + "\n")
        sys.stdout.flush()
    if failure is not None:
        raise failure


def build_config(fields: dict[str, Any], config_file: Path | None) -> SinkConfig:
    """The sink config from flags and, under them, the YAML file.

    Without a name, the sink is named after the last part of its class name,
    else its file, else its built-in type.
    """
    from sparkfn.config.connector import SinkConfig
    from sparkfn.config.function import ProcessingGuarantee, SubscriptionPosition

    fields = config_fields(
        fields,
        integers=_INTEGER_FIELDS,
        enums={
            "processing_guarantees": [e.value for e in ProcessingGuarantee],
            "subscription_position": [e.value for e in SubscriptionPosition],
        },
    )
    default_name(fields, config_file, "sink_type")
    return load_config(SinkConfig, fields, config_file)


def _run(
    run: SinkRun, sigterm_mode: str, *, until_drained: bool
) -> tuple[FunctionStatus, Exception | None]:
    """Run the sink until it ends; signals stop it. The final status and the failure, if any."""
    from sparkfn.api.errors import ConnectorFailedError

    sink = run.sink
    signals = StopSignals(sigterm_mode)
    with ExitStack() as stack:
        signals.install()
        stack.callback(signals.restore)
        what = sink.sink_type or sink.classname or sink.py
        note(
            f"starting sink {sink.fqn} ({what}) on {run.spark_master}: "
            f"{', '.join(sink.inputs)} -> {what}"
        )
        return run_query(
            run,
            label=f"sink {sink.fqn}",
            signals=signals,
            until_drained=until_drained,
            display=lambda: progress_display(Console(stderr=True, highlight=False), run.config),
            failure_type=ConnectorFailedError,
            refresh_seconds=REFRESH_SECONDS,
        )
