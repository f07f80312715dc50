"""``sparkfn functions``: run a function.

::

    sparkfn functions localrun --py wordcount.py --classname wordcount.WordCount \\
        --inputs sentences --output counts
    sparkfn functions localrun --function-config-file wc.yaml --parallelism 4 --metrics-port 9094
    sparkfn functions localrun --py exclamation.py --inputs in --output out \\
        --subscription-position earliest --until-drained --json-status

``localrun`` runs the function's Spark query in this process, on ``local[*]``
or ``--spark-master``. The flags are the fields of the function config
(Pulsar's names, kebab-case); with ``--function-config-file`` they override
the file. Everything that can be checked before Spark starts is: the config,
the topics and the code, so a mistake costs no JVM start.

While it runs, a table of per-instance counts refreshes on stderr (a plain
progress line every few seconds when stderr is not a terminal); stdout only
carries ``--json-status``. Ctrl+C or SIGTERM stops the query cleanly and
exits 0; a second one aborts. With ``--until-drained`` the command ends when
the input present at start is processed: 0 if that went well, 1 with an
``error [function_failed]`` line if the function failed.

pyspark is imported inside the command only, so the rest of the CLI stays fast.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from sparkfn.cli.context import open_store
from sparkfn.cli.params import parse_properties
from sparkfn.cli.running import (
    Display,
    FailurePolicyOption,
    Parallelism,
    Sigterm,
    SparkMaster,
    StopSignals,
    TriggerInterval,
    config_fields,
    default_name,
    elapsed,
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
    from sparkfn.config.function import FunctionConfig

functions_app = typer.Typer(
    name="functions",
    help="Run functions.",
    no_args_is_help=True,
)

# How often the live table is refreshed (and the query polled), in seconds.
REFRESH_SECONDS = 1.0
# How often a plain progress line may be printed when stderr is not a terminal.
PROGRESS_SECONDS = 5.0

_FUNCTION = "Function"
_INPUT = "Input"
_PROCESSING = "Processing"
_RUN = "Run"
_INTEGER_FIELDS = ("max_message_retries", "parallelism", "max_records_per_batch")


# Every function field is taken as text and validated by FunctionConfig, so
# that any bad value, a number too, is reported the same way: the function,
# the field, the problem and the value.
Tenant = Annotated[str | None, _field("--tenant", "Tenant (default public).", _FUNCTION, "NAME")]
Namespace = Annotated[
    str | None, _field("--namespace", "Namespace (default default).", _FUNCTION, "NAME")
]
Name = Annotated[
    str | None,
    _field(
        "--name",
        "Function name (default: the last part of --classname, else the --py file's name).",
        _FUNCTION,
        "NAME",
    ),
]
Py = Annotated[
    str | None, _field("--py", "The function's .py file (or .zip/.whl).", _FUNCTION, "PATH")
]
Classname = Annotated[
    str | None,
    _field(
        "--classname",
        "module.Name of the function or Function class (default: the file's process).",
        _FUNCTION,
        "MODULE.NAME",
    ),
]
UserConfig = Annotated[
    str | None,
    _field("--user-config", "User config as a JSON or YAML object.", _FUNCTION, "JSON"),
]
Secrets = Annotated[
    str | None, _field("--secrets", "Secrets as a JSON object of strings.", _FUNCTION, "JSON")
]
PulsarCompat = Annotated[
    bool | None,
    typer.Option(
        "--pulsar-compat/--no-pulsar-compat",
        help="Run a file written for Pulsar (from pulsar import Function) unchanged.",
        rich_help_panel=_FUNCTION,
        show_default=False,
    ),
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
TopicsPattern = Annotated[
    str | None,
    _field("--topics-pattern", "Also read every topic matching this regex.", _INPUT, "REGEX"),
]
SubscriptionName = Annotated[
    str | None,
    _field(
        "--subscription-name", "Subscription name (default tenant/namespace/name).", _INPUT, "NAME"
    ),
]
SubscriptionType = Annotated[
    str | None,
    _field(
        "--subscription-type",
        "shared, key_shared or failover (default shared).",
        _INPUT,
        "TYPE",
    ),
]
SubscriptionPosition = Annotated[
    str | None,
    _field(
        "--subscription-position",
        "Where a new subscription starts: latest or earliest (default latest).",
        _INPUT,
        "POSITION",
    ),
]
InputSerde = Annotated[
    str | None,
    _field(
        "--input-serde",
        "auto, bytes, string, json or module.Class (default auto).",
        _INPUT,
        "SERDE",
    ),
]
Output = Annotated[str | None, _field("--output", "Output topic.", _PROCESSING, "TOPIC")]
OutputSerde = Annotated[
    str | None,
    _field(
        "--output-serde",
        "auto, bytes, string, json or module.Class (default auto).",
        _PROCESSING,
        "SERDE",
    ),
]
LogTopic = Annotated[
    str | None, _field("--log-topic", "Topic for the function's log.", _PROCESSING, "TOPIC")
]
DeadLetterTopic = Annotated[
    str | None,
    _field(
        "--dead-letter-topic",
        "Topic for messages that failed every attempt.",
        _PROCESSING,
        "TOPIC",
    ),
]
MaxMessageRetries = Annotated[
    str | None,
    _field("--max-message-retries", "Retries of a failing message (0 to 100).", _PROCESSING, "N"),
]
ProcessingGuarantees = Annotated[
    str | None,
    _field(
        "--processing-guarantees",
        "at_least_once, at_most_once or effectively_once (Pulsar's ATLEAST_ONCE too).",
        _PROCESSING,
        "GUARANTEE",
    ),
]
AutoCreateTopics = Annotated[
    bool | None,
    typer.Option(
        "--auto-create-topics/--no-auto-create-topics",
        help="Create a topic that context.publish names on first use (1 partition, bytes) "
        "instead of failing the message (default: fail).",
        rich_help_panel=_PROCESSING,
        show_default=False,
    ),
]
DropFailedMessages = Annotated[
    bool | None,
    typer.Option(
        "--drop-failed-messages/--no-drop-failed-messages",
        help="Drop a message that failed every attempt instead of sending it to the "
        "dead-letter topic (default: {tenant}/{namespace}/{name}-DLQ).",
        rich_help_panel=_PROCESSING,
        show_default=False,
    ),
]
RetainOrdering = Annotated[
    bool | None,
    typer.Option(
        "--retain-ordering/--no-retain-ordering",
        help="Keep partition order (makes a shared subscription failover).",
        rich_help_panel=_PROCESSING,
        show_default=False,
    ),
]
MaxRecordsPerBatch = Annotated[
    str | None,
    _field("--max-records-per-batch", "Cap on the messages of one micro-batch.", _RUN, "N"),
]
SparkConf = Annotated[
    list[str] | None,
    typer.Option(
        "--spark-conf",
        help="A Spark setting KEY=VALUE; may be repeated.",
        rich_help_panel=_RUN,
        metavar="KEY=VALUE",
    ),
]


@functions_app.command("localrun")
def localrun(
    ctx: typer.Context,
    tenant: Tenant = None,
    namespace: Namespace = None,
    name: Name = None,
    py: Py = None,
    classname: Classname = None,
    inputs: Inputs = None,
    topics_pattern: TopicsPattern = None,
    output: Output = None,
    log_topic: LogTopic = None,
    dead_letter_topic: DeadLetterTopic = None,
    max_message_retries: MaxMessageRetries = None,
    processing_guarantees: ProcessingGuarantees = None,
    subscription_type: SubscriptionType = None,
    subscription_position: SubscriptionPosition = None,
    subscription_name: SubscriptionName = None,
    parallelism: Parallelism = None,
    user_config: UserConfig = None,
    secrets: Secrets = None,
    retain_ordering: RetainOrdering = None,
    auto_create_topics: AutoCreateTopics = None,
    drop_failed_messages: DropFailedMessages = None,
    pulsar_compat: PulsarCompat = None,
    trigger_interval: TriggerInterval = None,
    max_records_per_batch: MaxRecordsPerBatch = None,
    spark_conf: SparkConf = None,
    failure_policy: FailurePolicyOption = None,
    input_serde: InputSerde = None,
    output_serde: OutputSerde = None,
    function_config_file: Annotated[
        Path | None,
        typer.Option(
            "--function-config-file",
            help="YAML function config (Pulsar's camelCase keys too); flags override it.",
            rich_help_panel=_FUNCTION,
            metavar="PATH",
        ),
    ] = None,
    until_drained: Annotated[
        bool,
        typer.Option(
            "--until-drained",
            help="Process what the inputs hold now, then stop (exit 1 if the function failed).",
            rich_help_panel=_RUN,
        ),
    ] = False,
    spark_master: SparkMaster = "local[*]",
    metrics_port: Annotated[
        int,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help="Serve Prometheus metrics at http://HOST:PORT/metrics (0: do not).",
            rich_help_panel=_RUN,
            metavar="PORT",
        ),
    ] = 0,
    sigterm: Sigterm = "drain",
    json_status: Annotated[
        bool,
        typer.Option(
            "--json-status",
            help="Print the final status (Pulsar's FunctionStatus JSON) on stdout.",
            rich_help_panel=_RUN,
        ),
    ] = False,
) -> None:
    """Run a function in this process until Ctrl+C (or, with --until-drained, until done)."""
    mode = stop_mode(sigterm)
    fields: dict[str, Any] = {
        "tenant": tenant,
        "namespace": namespace,
        "name": name,
        "py": py,
        "classname": classname,
        "inputs": split_topics(inputs),
        "topics_pattern": topics_pattern,
        "output": output,
        "log_topic": log_topic,
        "dead_letter_topic": dead_letter_topic,
        "max_message_retries": max_message_retries,
        "processing_guarantees": processing_guarantees,
        "subscription_type": subscription_type,
        "subscription_position": subscription_position,
        "subscription_name": subscription_name,
        "parallelism": parallelism,
        "user_config": user_config,
        "secrets": mapping(secrets),
        "failure_policy": mapping(failure_policy),
        "retain_ordering": retain_ordering,
        "auto_create_topics": auto_create_topics,
        "drop_failed_messages": drop_failed_messages,
        "pulsar_compat": pulsar_compat,
        "trigger_interval": trigger_interval,
        "max_records_per_batch": max_records_per_batch,
        "input_serde": input_serde,
        "output_serde": output_serde,
    }
    config = build_config(fields, spark_conf or [], function_config_file)
    with open_store(ctx) as store:
        # pyspark's Python modules load here; the JVM only starts in _run.
        from sparkfn.runtime.query import validate

        validate(store, config)
        status, failure = _run(
            store,
            config,
            spark_master,
            metrics_port=metrics_port,
            until_drained=until_drained,
            sigterm=mode,
        )
    if json_status:
        sys.stdout.write(json.dumps(status.model_dump(by_alias=True, mode="json")) + "\n")
        sys.stdout.flush()
    if failure is not None:
        raise failure


# --- the config -------------------------------------------------------------------


def build_config(
    fields: dict[str, Any], spark_conf: list[str], config_file: Path | None
) -> FunctionConfig:
    """The function config from flags and, under them, the YAML file.

    Without a name, the function is named as Pulsar names it: after the last
    part of the class name, else (sparkfn) after the file.
    """
    from sparkfn.api.errors import ConfigError
    from sparkfn.config.function import (
        FunctionConfig,
        ProcessingGuarantee,
        SubscriptionPosition,
        SubscriptionType,
    )

    fields = config_fields(
        fields,
        integers=_INTEGER_FIELDS,
        enums={
            "processing_guarantees": [e.value for e in ProcessingGuarantee],
            "subscription_type": [e.value for e in SubscriptionType],
            "subscription_position": [e.value for e in SubscriptionPosition],
        },
    )
    default_name(fields, config_file)
    if spark_conf:
        try:
            fields["spark_conf"] = parse_properties(spark_conf, "--spark-conf")
        except typer.BadParameter as exc:
            shown = fields.get("name", "?")
            msg = f"function {shown}: invalid config: spark_conf: {exc.message}"
            raise ConfigError(msg) from None
    return load_config(FunctionConfig, fields, config_file)


# --- running --------------------------------------------------------------------


def _run(
    store: Any,
    config: FunctionConfig,
    spark_master: str,
    *,
    metrics_port: int,
    until_drained: bool,
    sigterm: str = "drain",
) -> tuple[FunctionStatus, Exception | None]:
    """Run the query until it ends or is stopped; the final status and the failure, if any."""
    from sparkfn.api.errors import FunctionFailedError
    from sparkfn.runtime.localrun import LocalRun

    signals = StopSignals(sigterm)
    run = LocalRun(config, store=store, spark_master=spark_master)
    with ExitStack() as stack:
        signals.install()
        stack.callback(signals.restore)
        if metrics_port:
            from sparkfn.runtime.prometheus import serve_metrics

            # Before the JVM, so that a busy port costs nothing.
            server = serve_metrics(metrics_port, store, config)
            stack.callback(server.close)
            note(f"serving metrics of {config.fqfn} on port {server.port} (/metrics)")
        note(
            f"starting function {config.fqfn} on {spark_master}: "
            f"{', '.join(config.inputs) or config.topics_pattern} -> {config.output or '-'}"
        )
        return run_query(
            run,
            label=f"function {config.fqfn}",
            signals=signals,
            until_drained=until_drained,
            display=lambda: progress_display(Console(stderr=True, highlight=False), config),
            failure_type=FunctionFailedError,
            refresh_seconds=REFRESH_SECONDS,
        )


# --- showing progress -----------------------------------------------------------


def progress_display(console: Console, config: FunctionConfig) -> Display:
    """Per-instance counts of a query run: a live table on a terminal, else progress lines."""
    started = time.monotonic()
    if console.is_terminal:
        return _LiveTable(console, config, started)
    return _ProgressLines(config, started)


def _last_invocation(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S")


class _LiveTable:
    """Per-instance counts in a table redrawn in place on a terminal."""

    def __init__(self, console: Console, config: FunctionConfig, started: float) -> None:
        self.config = config
        self.started = started
        self.live = Live(console=console, auto_refresh=False, transient=False)
        self.live.start()

    def update(self, status: FunctionStatus) -> None:
        self.live.update(self._table(status), refresh=True)

    def close(self, status: FunctionStatus | None) -> None:
        if not self.live.is_started:
            return
        if status is not None:
            self.update(status)
        self.live.stop()
        if status is not None:
            note_dead_letters(self.config, status)

    def _table(self, status: FunctionStatus) -> Table:
        cfg = self.config
        table = Table(
            "INSTANCE",
            "STATE",
            "RECEIVED",
            "PROCESSED",
            "USER EXC",
            "SYSTEM EXC",
            "DEAD-LETTERED",
            "AVG LATENCY",
            "LAST INVOCATION",
            title=f"{cfg.fqfn}  {', '.join(cfg.inputs) or '-'} -> {cfg.output or '-'}  "
            f"up {elapsed(self.started)}",
            title_justify="left",
        )
        for instance in status.instances:
            s = instance.status
            table.add_row(
                str(instance.instance_id),
                s.state.value,
                str(s.num_received),
                str(s.num_successfully_processed),
                str(s.num_user_exceptions),
                str(s.num_system_exceptions),
                str(s.num_dead_lettered),
                f"{s.average_latency:.3f} ms",
                _last_invocation(s.last_invocation_time),
            )
        return table


class _ProgressLines:
    """One line of totals every few seconds while they change, for logs and pipes."""

    def __init__(self, config: FunctionConfig, started: float) -> None:
        self.config = config
        self.started = started
        self.last_line_at = 0.0
        self.last_counts: tuple[int, ...] = ()
        self.closed = False

    def update(self, status: FunctionStatus) -> None:
        now = time.monotonic()
        if now - self.last_line_at < PROGRESS_SECONDS:
            return
        counts = _totals(status)
        if counts != self.last_counts:
            self._print(status, counts)
        self.last_line_at = now

    def close(self, status: FunctionStatus | None) -> None:
        if status is not None and not self.closed:
            self._print(status, _totals(status))
            note_dead_letters(self.config, status)
        self.closed = True

    def _print(self, status: FunctionStatus, counts: tuple[int, ...]) -> None:
        self.last_counts = counts
        received, processed, user, system, dead = counts
        states = sorted({i.status.state.value for i in status.instances})
        # Each instance's average is over its successfully processed messages.
        latency_sum = sum(
            i.status.average_latency * i.status.num_successfully_processed for i in status.instances
        )
        latency = latency_sum / processed if processed else 0.0
        sys.stderr.write(
            f"[{elapsed(self.started)}] {self.config.fqfn} {'/'.join(states)}: "
            f"received {received}, processed {processed}, user exceptions {user}, "
            f"system exceptions {system}, dead-lettered {dead}, avg latency {latency:.3f} ms\n"
        )
        sys.stderr.flush()


def note_dead_letters(config: FunctionConfig, status: FunctionStatus) -> None:
    """The run's last words on failed messages: which topic holds them."""
    dead = _totals(status)[4]
    target = config.dead_letter_target
    if dead and target is not None:
        sys.stderr.write(f"{dead} failed message(s) are in topic {target}\n")
        sys.stderr.flush()


def _totals(status: FunctionStatus) -> tuple[int, ...]:
    instances = [i.status for i in status.instances]
    return (
        sum(s.num_received for s in instances),
        sum(s.num_successfully_processed for s in instances),
        sum(s.num_user_exceptions for s in instances),
        sum(s.num_system_exceptions for s in instances),
        sum(s.num_dead_lettered for s in instances),
    )
