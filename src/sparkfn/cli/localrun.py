"""What the ``localrun`` commands take besides their config, and how functions and sinks run.

The options here are each command's own: the YAML config file, how the run
ends and is shown, where Spark runs. With the config flags of
:mod:`sparkfn.cli.options` they make each command's list (:data:`FUNCTION_LOCALRUN`,
:data:`SOURCE_LOCALRUN`, :data:`SINK_LOCALRUN`). ``functions`` and ``sinks
localrun`` then do the same (:func:`localrun_query`): build the config, check
what can be checked before Spark starts, run the query, print its end.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sparkfn.cli.configs import connector_config, function_config
from sparkfn.cli.context import note, open_store
from sparkfn.cli.flags import RUN_PANEL, Flag, PerKind
from sparkfn.cli.options import FUNCTION_CONFIG, SINK_CONFIG, SOURCE_CONFIG
from sparkfn.cli.pulsar_flags import PULSAR_LOCALRUN, localrun_warnings
from sparkfn.cli.running import QueryRun, finish, run_query, stop_mode

if TYPE_CHECKING:
    from sparkfn.config.connector import SinkConfig
    from sparkfn.config.function import FunctionConfig
    from sparkfn.store.store import Store

SPARK_MASTER_ENV = "SPARKFN_SPARK_MASTER"
VERBOSE_ENV = (
    "SPARKFN_VERBOSE"  # sparkfn.runtime.spark.jvm.VERBOSE_ENV, not imported: it loads the runtime
)

CONFIG_FILE = Flag(
    "--{kind}-config-file",
    "YAML {kind} config (Pulsar's camelCase keys too); flags override it.",
    "PATH",
    parses=Path | None,
    config=False,
    dest="config_file",
)


def _run_option(
    name: str,
    help_text: PerKind,
    metavar: str | None,
    parses: Any,
    default: Any,
    *,
    read: Callable[[Any], Any] | None = None,
    **typer_settings: Any,
) -> Flag:
    """An option of the command's own (not a config field), in the Run panel."""
    return Flag(
        name,
        help_text,
        metavar,
        RUN_PANEL,
        parses=parses,
        default=default,
        read=read,
        config=False,
        typer_settings=typer_settings,
    )


UNTIL_DRAINED = _run_option(
    "--until-drained",
    {
        "function": "Process what the inputs hold now, then stop (exit 1 if the function failed).",
        "sink": "Write what the inputs hold now, then stop (exit 1 if the sink failed).",
    },
    None,
    bool,
    False,
)
SPARK_MASTER = _run_option(
    "--spark-master",
    "Spark master URL.",
    "URL",
    str,
    "local[*]",
    envvar=SPARK_MASTER_ENV,
    show_envvar=True,
)
METRICS_PORT = _run_option(
    "--metrics-port",
    "Serve Prometheus metrics at http://HOST:PORT/metrics (0: do not).",
    "PORT",
    int,
    0,
    min=0,
    max=65535,
)
SIGTERM = _run_option(
    "--sigterm",
    "How SIGTERM stops the run: drain, suspend or cancel. Ctrl+C drains; a second stop signal cancels.",
    "MODE",
    str,
    "drain",
    read=stop_mode,
)
JSON_STATUS = _run_option(
    "--json-status",
    {
        "function": "Print the final status (Pulsar's FunctionStatus JSON) on stdout.",
        "source": "Print the final status (JSON, per instance) on stdout.",
        "sink": "Print the final status (Pulsar-shaped JSON, per instance) on stdout.",
    },
    None,
    bool,
    False,
)

VERBOSE = _run_option(
    "--verbose",
    "Show the JVM's own output on stderr: its warnings, Spark's log4j lines.",
    None,
    bool,
    False,
    envvar=VERBOSE_ENV,
    show_envvar=True,
)

FUNCTION_LOCALRUN = (
    *FUNCTION_CONFIG,
    CONFIG_FILE,
    UNTIL_DRAINED,
    SPARK_MASTER,
    METRICS_PORT,
    SIGTERM,
    JSON_STATUS,
    VERBOSE,
    *PULSAR_LOCALRUN,
)
SOURCE_LOCALRUN = (*SOURCE_CONFIG, CONFIG_FILE, SIGTERM, JSON_STATUS)
SINK_LOCALRUN = (
    *SINK_CONFIG,
    CONFIG_FILE,
    UNTIL_DRAINED,
    SIGTERM,
    SPARK_MASTER,
    JSON_STATUS,
    VERBOSE,
)


def localrun_query(
    ctx: typer.Context,
    kind: str,
    fields: Mapping[str, Any],
    *,
    config_file: Path | None,
    spark_master: str,
    sigterm: str,
    until_drained: bool,
    json_status: bool,
    verbose: bool,
    metrics_port: int = 0,
    **pulsar: Any,
) -> None:
    """``functions`` or ``sinks localrun`` (``kind``): build the config, check it, run it.

    Everything that can be checked before Spark starts is (the config, the
    topics, the code), so a mistake costs no JVM start. ``pulsar`` holds
    Pulsar's localrun flags (:data:`~sparkfn.cli.pulsar_flags.PULSAR_LOCALRUN`);
    a warning line on stderr names each field or flag sparkfn ignores.
    """
    if verbose:  # read where the JVM starts (sparkfn.runtime.spark.jvm)
        os.environ[VERBOSE_ENV] = "1"
    config_file = config_file or pulsar.get("functionConfigFile")
    if not metrics_port and pulsar.get("metrics_port_start"):
        metrics_port = _port(pulsar["metrics_port_start"])
    config, warnings = _query_config(kind, fields, config_file)
    for warning in (*warnings, *localrun_warnings(pulsar)):
        note(f"warning: {warning}")
    with open_store(ctx) as store:
        run, label, starting = _checked_run(config, store, spark_master)
        status, failure = run_query(
            run,
            label,
            starting,
            sigterm=sigterm,
            until_drained=until_drained,
            metrics_port=metrics_port,
        )
    finish(status, failure, json_status=json_status)


def _query_config(
    kind: str, fields: Mapping[str, Any], config_file: Path | None
) -> tuple[FunctionConfig | SinkConfig, tuple[str, ...]]:
    """The function's or the sink's config from its flags and file, and the warnings."""
    if kind == "sink":
        config, warnings = connector_config(kind, fields, config_file)
        return config, warnings
    return function_config(fields, config_file)


def _port(text: str) -> int:
    """``--metrics-port-start``'s value as a port, or a :class:`ConfigError`."""
    from sparkfn.api.errors import ConfigError

    if not text.strip().isdigit() or not 0 < int(text) < 65536:
        msg = f"--metrics-port-start must be a port, 1 to 65535 (got {text!r})"
        raise ConfigError(msg)
    return int(text)


def _checked_run(
    config: FunctionConfig | SinkConfig, store: Store, spark_master: str
) -> tuple[QueryRun, str, str]:
    """The run of ``config`` once its topics and code are found; its label and first line.

    pyspark's Python modules load here; the JVM only starts in :func:`run_query`.
    """
    from sparkfn.config.connector import SinkConfig

    run: QueryRun
    if isinstance(config, SinkConfig):
        from sparkfn.connectors.sink.sink_run import SinkRun, validate_sink
        from sparkfn.topics.autocreate import TopicCreation

        validate_sink(store, config, TopicCreation.read(store))  # missing inputs made
        run = SinkRun(config, store=store, spark_master=spark_master)
        what = config.sink_type or config.classname or config.py
        label, detail = f"sink {config.fqn}", f" ({what})"
        flow = f"{', '.join(config.inputs)} -> {what}"
    else:
        from sparkfn.runtime.function_run import FunctionRun
        from sparkfn.runtime.query.build import prepare

        prepared = prepare(store, config)
        run = FunctionRun(config, store=store, spark_master=spark_master, prepared=prepared)
        label, detail = f"function {config.fqfn}", ""
        flow = f"{', '.join(config.inputs) or config.topics_pattern} -> {config.output or '-'}"
    return run, label, f"starting {label}{detail} on {spark_master}: {flow}"
