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
import re
import signal
import sys
import threading
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from sparkfn.cli.context import open_store
from sparkfn.cli.params import parse_properties

if TYPE_CHECKING:
    from sparkfn.config.function import FunctionConfig

functions_app = typer.Typer(
    name="functions",
    help="Run functions.",
    no_args_is_help=True,
)

SPARK_MASTER_ENV = "SPARKFN_SPARK_MASTER"
# How often the live table is refreshed (and the query polled), in seconds.
REFRESH_SECONDS = 1.0
# How often a plain progress line may be printed when stderr is not a terminal.
PROGRESS_SECONDS = 5.0

_FUNCTION = "Function"
_INPUT = "Input"
_PROCESSING = "Processing"
_RUN = "Run"

# Pulsar spells some enum values differently; the config takes sparkfn's.
_PULSAR_SPELLINGS = {"atleast_once": "at_least_once", "atmost_once": "at_most_once"}
_INTEGER_FIELDS = ("max_message_retries", "parallelism", "max_records_per_batch")
_INTEGER = re.compile(r"[+-]?\d+")


def _field(flag: str, help_text: str, panel: str, metavar: str | None = None) -> Any:
    return typer.Option(flag, help=help_text, rich_help_panel=panel, metavar=metavar)


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
RetainOrdering = Annotated[
    bool | None,
    typer.Option(
        "--retain-ordering/--no-retain-ordering",
        help="Keep partition order (makes a shared subscription failover).",
        rich_help_panel=_PROCESSING,
        show_default=False,
    ),
]
Parallelism = Annotated[
    str | None, _field("--parallelism", "Number of instances (1 to 256).", _RUN, "N")
]
TriggerInterval = Annotated[
    str | None,
    _field(
        "--trigger-interval",
        "Time between micro-batches: 500ms, 2s, 1m (default: as fast as possible).",
        _RUN,
        "DURATION",
    ),
]
MaxRecordsPerBatch = Annotated[
    str | None,
    _field("--max-records-per-batch", "Cap on the messages of one micro-batch.", _RUN, "N"),
]
FailurePolicyOption = Annotated[
    str | None,
    _field(
        "--failure-policy",
        "What happens after an instance dies, as a JSON object: on_failure, on_fatal, "
        "handler, max_restarts, restart_window, backoff_initial, ... (docs/lifecycle.md).",
        _RUN,
        "JSON",
    ),
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
    spark_master: Annotated[
        str,
        typer.Option(
            "--spark-master",
            envvar=SPARK_MASTER_ENV,
            show_envvar=True,
            help="Spark master URL.",
            rich_help_panel=_RUN,
            metavar="URL",
        ),
    ] = "local[*]",
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
    sigterm: Annotated[
        str,
        typer.Option(
            "--sigterm",
            help="How SIGTERM stops the function: drain, suspend or cancel. Ctrl+C drains; a second Ctrl+C cancels.",
            rich_help_panel=_RUN,
            metavar="MODE",
        ),
    ] = "drain",
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
    fields: dict[str, Any] = {
        "tenant": tenant,
        "namespace": namespace,
        "name": name,
        "py": py,
        "classname": classname,
        "inputs": _split_topics(inputs),
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
        "secrets": _json_object(secrets),
        "failure_policy": _json_object(failure_policy),
        "retain_ordering": retain_ordering,
        "pulsar_compat": pulsar_compat,
        "trigger_interval": trigger_interval,
        "max_records_per_batch": max_records_per_batch,
        "input_serde": input_serde,
        "output_serde": output_serde,
    }
    if sigterm not in STOP_MODES:
        from sparkfn.api.errors import ConfigError

        msg = f"--sigterm must be one of {', '.join(STOP_MODES)}; got {sigterm!r}"
        raise ConfigError(msg)
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
            sigterm=sigterm,
        )
    if json_status:
        sys.stdout.write(json.dumps(status) + "\n")
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

    fields = {k: v for k, v in fields.items() if v is not None}
    for key in _INTEGER_FIELDS:
        if isinstance(fields.get(key), str) and _INTEGER.fullmatch(fields[key].strip()):
            # A number reads as one in the error: "(got 0)", not "(got '0')".
            fields[key] = int(fields[key])
    for key, enum in (
        ("processing_guarantees", ProcessingGuarantee),
        ("subscription_type", SubscriptionType),
        ("subscription_position", SubscriptionPosition),
    ):
        if key in fields:
            fields[key] = _enum_value(fields[key], {e.value for e in enum})
    if not fields.get("name"):
        from_file = _peek_yaml(config_file) if config_file else {}
        if not from_file.get("name"):
            derived = _derived_name(
                fields.get("classname") or from_file.get("classname") or from_file.get("className"),
                fields.get("py") or from_file.get("py"),
            )
            if derived:
                fields["name"] = derived
    if spark_conf:
        try:
            fields["spark_conf"] = parse_properties(spark_conf, "--spark-conf")
        except typer.BadParameter as exc:
            shown = fields.get("name", "?")
            msg = f"function {shown}: invalid config: spark_conf: {exc.message}"
            raise ConfigError(msg) from None
    if config_file is not None:
        config = FunctionConfig.from_yaml(config_file, **fields)
    else:
        config = FunctionConfig.build(**fields)
    if config.py:
        # Absolute, so that Spark's Python workers find it whatever their directory.
        config = config.model_copy(update={"py": str(Path(config.py).expanduser().resolve())})
    return config


def _split_topics(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [topic.strip() for value in values for topic in value.split(",") if topic.strip()]


def _json_object(text: str | None) -> Any:
    """A JSON object as a dict; anything else unchanged, for the config to reject by name."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _enum_value(text: Any, allowed: set[str]) -> Any:
    """``Shared``, ``ATLEAST_ONCE``, ``key-shared`` → sparkfn's value; unknown text unchanged."""
    if not isinstance(text, str):
        return text
    value = text.strip().lower().replace("-", "_")
    value = _PULSAR_SPELLINGS.get(value, value)
    return value if value in allowed else text


def _derived_name(classname: Any, py: Any) -> str | None:
    if isinstance(classname, str) and classname.strip():
        return classname.strip().rpartition(".")[2] or None
    if isinstance(py, str) and py.strip():
        return Path(py.strip()).stem or None
    return None


def _peek_yaml(path: Path) -> dict[str, Any]:
    """The file's top-level mapping, or nothing: reading it for real reports its errors."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


# --- running --------------------------------------------------------------------


STOP_MODES = ("drain", "suspend", "cancel")


class _StopSignals:
    """Signals ask the run to stop: SIGTERM with its configured mode, the first
    SIGINT drains, a second signal cancels (before the run exists: aborts)."""

    def __init__(self, sigterm_mode: str = "drain") -> None:
        self.requested = threading.Event()
        self.signal_name = ""
        self.mode = ""
        self.sigterm_mode = sigterm_mode
        self.run: Any = None
        self._previous: dict[signal.Signals, Any] = {}

    def install(self) -> None:
        """Take over both signals (again: SparkContext installs its own SIGINT handler)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.signal(sig, self._handle)
            self._previous.setdefault(sig, previous)

    def restore(self) -> None:
        """Give the signals back to the handlers found by the first :meth:`install`."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested.is_set():
            if self.run is None:
                raise KeyboardInterrupt
            # A second signal: cancel, from a thread (the main one may hold the run's lock).
            self.mode = "cancel"
            threading.Thread(target=self.run.stop, args=("cancel",), daemon=True).start()
            return
        self.signal_name = signal.Signals(signum).name
        self.mode = "drain" if signum == signal.SIGINT else self.sigterm_mode
        self.requested.set()


def _run(
    store: Any,
    config: FunctionConfig,
    spark_master: str,
    *,
    metrics_port: int,
    until_drained: bool,
    sigterm: str = "drain",
) -> tuple[dict[str, Any], Exception | None]:
    """Run the query until it ends or is stopped; the final status and the failure, if any."""
    from sparkfn.api.errors import FunctionFailedError
    from sparkfn.runtime.localrun import LocalRun

    signals = _StopSignals(sigterm)
    failure: Exception | None = None
    run = LocalRun(config, store=store, spark_master=spark_master)
    with ExitStack() as stack:
        signals.install()
        stack.callback(signals.restore)
        if metrics_port:
            from sparkfn.runtime.prometheus import serve_metrics

            # Before the JVM, so that a busy port costs nothing.
            server = serve_metrics(metrics_port, store, config)
            stack.callback(server.close)
            _note(f"serving metrics of {config.fqfn} on port {server.port} (/metrics)")
        _note(
            f"starting {config.fqfn} on {spark_master}: "
            f"{', '.join(config.inputs) or config.topics_pattern} -> {config.output or '-'}"
        )
        display: _Display | None = None
        try:
            stack.callback(_stop_spark, _start_spark(run))
            # Creating the SparkContext installed pyspark's SIGINT handler; take SIGINT back.
            signals.install()
            stack.callback(run.stop)
            if not signals.requested.is_set():
                run.start(until_drained=until_drained)
                signals.run = run
                display = _display(Console(stderr=True, highlight=False), config)
                stack.callback(display.close, None)
                _watch(run, signals, display)
                if signals.requested.is_set():
                    _note(f"{signals.mode or 'drain'}ing {config.fqfn} ({signals.signal_name})")
                    run.stop(signals.mode or "drain")
                    run.wait(0)  # raises if the run ended in ERROR
        except FunctionFailedError as exc:
            failure = exc
        except KeyboardInterrupt:
            if signals.requested.is_set():
                raise  # a second signal: abort, do not wait for a clean stop
            # Ctrl+C while pyspark's own handler was in place (the JVM was starting).
            signals.requested.set()
            signals.signal_name = signals.signal_name or "SIGINT"
        run.stop()
        status = run.status()
        if display is not None:
            display.close(status)
    if signals.requested.is_set() and failure is None:
        _note(f"stopped {config.fqfn} ({signals.signal_name}): {signals.mode}, {run.run_state}")
    return status, failure


def _note(text: str) -> None:
    # Plain text: stderr may be a log file, where Rich would wrap at 80 columns.
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _start_spark(run: Any) -> Any:
    """The run's SparkSession, started now; a failure to start is one error line."""
    from sparkfn.api.errors import SparkfnError

    try:
        return run.spark
    except Exception as exc:  # Py4J and Spark errors: a bad master URL, no Java, ...
        lines = str(exc).strip().splitlines()
        shown = lines[0] if lines else type(exc).__name__
        msg = f"function {run.config.fqfn}: cannot start Spark on {run.spark_master}: {shown}"
        raise SparkfnError(msg) from exc


def _stop_spark(spark: Any) -> None:
    try:
        spark.stop()
    except Exception as exc:  # the run is over; a failing stop must not hide its result
        sys.stderr.write(f"warning: stopping Spark failed: {exc}\n")


def _watch(run: Any, signals: _StopSignals, display: _Display) -> None:
    """Refresh the display until the query ends (raises if it failed) or a stop is asked."""
    if run.query is None:
        return
    while not signals.requested.is_set():
        if run.wait(timeout=REFRESH_SECONDS):
            return
        display.update(run.status())


# --- showing progress -----------------------------------------------------------


class _Display(Protocol):
    def update(self, status: dict[str, Any]) -> None:
        """Show the status now (or when it is time to)."""

    def close(self, status: dict[str, Any] | None) -> None:
        """Show the final status, if given, and finish; later calls do nothing."""


def _display(console: Console, config: FunctionConfig) -> _Display:
    started = time.monotonic()
    if console.is_terminal:
        return _LiveTable(console, config, started)
    return _ProgressLines(config, started)


def _elapsed(started: float) -> str:
    seconds = int(time.monotonic() - started)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


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

    def update(self, status: dict[str, Any]) -> None:
        self.live.update(self._table(status), refresh=True)

    def close(self, status: dict[str, Any] | None) -> None:
        if not self.live.is_started:
            return
        if status is not None:
            self.update(status)
        self.live.stop()

    def _table(self, status: dict[str, Any]) -> Table:
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
            f"up {_elapsed(self.started)}",
            title_justify="left",
        )
        for instance in status["instances"]:
            s = instance["status"]
            table.add_row(
                str(instance["instanceId"]),
                s["state"],
                str(s["numReceived"]),
                str(s["numSuccessfullyProcessed"]),
                str(s["numUserExceptions"]),
                str(s["numSystemExceptions"]),
                str(s["numDeadLettered"]),
                f"{s['averageLatency']:.3f} ms",
                _last_invocation(s["lastInvocationTime"]),
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

    def update(self, status: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - self.last_line_at < PROGRESS_SECONDS:
            return
        counts = _totals(status)
        if counts != self.last_counts:
            self._print(status, counts)
        self.last_line_at = now

    def close(self, status: dict[str, Any] | None) -> None:
        if status is not None and not self.closed:
            self._print(status, _totals(status))
        self.closed = True

    def _print(self, status: dict[str, Any], counts: tuple[int, ...]) -> None:
        self.last_counts = counts
        received, processed, user, system, dead = counts
        states = sorted({i["status"]["state"] for i in status["instances"]})
        # Each instance's average is over its successfully processed messages.
        latency_sum = sum(
            i["status"]["averageLatency"] * i["status"]["numSuccessfullyProcessed"]
            for i in status["instances"]
        )
        latency = latency_sum / processed if processed else 0.0
        sys.stderr.write(
            f"[{_elapsed(self.started)}] {self.config.fqfn} {'/'.join(states)}: "
            f"received {received}, processed {processed}, user exceptions {user}, "
            f"system exceptions {system}, dead-lettered {dead}, avg latency {latency:.3f} ms\n"
        )
        sys.stderr.flush()


def _totals(status: dict[str, Any]) -> tuple[int, ...]:
    keys = (
        "numReceived",
        "numSuccessfullyProcessed",
        "numUserExceptions",
        "numSystemExceptions",
        "numDeadLettered",
    )
    return tuple(sum(i["status"][key] for i in status["instances"]) for key in keys)
