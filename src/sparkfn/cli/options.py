"""Command-line options that more than one command takes, each declared once.

The ``localrun`` commands' options are :class:`~sparkfn.cli.flags.Flag`
declarations: ``--processing-guarantees`` reads alike in ``functions``,
``sources`` and ``sinks localrun``, and a worker's ``functions create`` and
``update`` can take :data:`FUNCTION_CONFIG` as ``functions localrun`` does,
Pulsar's flags included (:mod:`sparkfn.cli.pulsar_flags`; Pulsar's spellings
of sparkfn's own are aliases: ``-i``, ``--subs-name``, ...).
The options a ``localrun`` command has besides its config flags are in
:mod:`sparkfn.cli.localrun`. Each declaration is written one argument a line,
as a table is read.

Config flags are taken as text and validated by the config model, so that
any bad value, a number too, is reported the same way: the function or
connector, the field, the problem and the value.
"""

from __future__ import annotations

from typing import Annotated

import typer

from sparkfn.cli.configs import mapping, split_topics, user_config
from sparkfn.cli.flags import INPUT_PANEL, OUTPUT_PANEL, PROCESSING_PANEL, RUN_PANEL, Flag
from sparkfn.cli.pulsar_flags import (
    PULSAR_FUNCTION_CONFIG,
    PULSAR_SINK_CONFIG,
    PULSAR_SOURCE_CONFIG,
)

TopicArgument = Annotated[
    str,
    typer.Argument(
        metavar="TOPIC",
        help="NAME (in public/default), tenant/namespace/NAME or persistent://tenant/namespace/NAME.",
        show_default=False,
    ),
]

# --- what functions, sources and sinks are -----------------------------------------

_CONNECTOR_NAME = (
    "{Kind} name (default: the last part of --classname, the --py file's name, "
    "else the --{kind}-type)."
)
_CONNECTOR_CLASS = "module.Name of the {Kind} class (default: the one the --py file defines)."

TENANT = Flag(
    "--tenant",
    "Tenant (default public).",
    "NAME",
)
NAMESPACE = Flag(
    "--namespace",
    "Namespace (default default).",
    "NAME",
)
NAME = Flag(
    "--name",
    {
        "function": "Function name (default: the last part of --classname, "
        "else the --py file's name).",
        "source": _CONNECTOR_NAME,
        "sink": _CONNECTOR_NAME,
    },
    "NAME",
)
PY = Flag(
    "--py",
    "The {kind}'s .py file (or .zip/.whl).",
    "PATH",
)
CLASSNAME = Flag(
    "--classname",
    {
        "function": "module.Name of the function or Function class (default: the file's process).",
        "source": _CONNECTOR_CLASS,
        "sink": _CONNECTOR_CLASS,
    },
    "MODULE.NAME",
)
SOURCE_TYPE = Flag(
    "--source-type",
    "A built-in source: file, generator, mqtt, nats, postgres, rabbitmq or redis.",
    "TYPE",
)
SINK_TYPE = Flag(
    "--sink-type",
    "A built-in sink: file, mqtt, nats, postgres, rabbitmq, redis or stdout.",
    "TYPE",
)
_CONNECTOR_CONFIGS = "The {kind}'s configs (what open() receives), a JSON or YAML object."
SOURCE_CONFIGS = Flag(
    "--source-config",
    _CONNECTOR_CONFIGS,
    "JSON",
    read=mapping,
    dest="configs",
)
SINK_CONFIGS = Flag(
    "--configs",
    _CONNECTOR_CONFIGS,
    "JSON",
    read=mapping,
    aliases=("--sink-config",),
)
USER_CONFIG = Flag(
    "--user-config",
    "User config as a JSON or YAML object.",
    "JSON",
    read=user_config,
)
SECRETS = Flag(
    "--secrets",
    "Secrets as a JSON object of strings.",
    "JSON",
    read=mapping,
)
PULSAR_COMPAT = Flag(
    "--pulsar-compat",
    "Force Pulsar's serde and Context behaviour on or off (default: decided by the "
    "code: a file that imports pulsar, or a native function, gets them).",
    parses=bool | None,
)

# --- what they read -----------------------------------------------------------------

INPUTS = Flag(
    "--inputs",
    "Input topics, comma-separated; may be repeated.",
    "TOPICS",
    INPUT_PANEL,
    parses=list[str] | None,
    read=split_topics,
    aliases=("-i",),
)
TOPICS_PATTERN = Flag(
    "--topics-pattern",
    "Also read every topic matching this regex.",
    "REGEX",
    INPUT_PANEL,
)
SUBSCRIPTION_NAME = Flag(
    "--subscription-name",
    {
        "function": "Subscription name (default tenant/namespace/name).",
        "sink": "Subscription name (default sink:tenant/namespace/name).",
    },
    "NAME",
    INPUT_PANEL,
    aliases=("--subs-name",),
)
SUBSCRIPTION_TYPE = Flag(
    "--subscription-type",
    "shared, key_shared or failover (default shared).",
    "TYPE",
    INPUT_PANEL,
)
SUBSCRIPTION_POSITION = Flag(
    "--subscription-position",
    {
        "function": "Where a new subscription starts: latest or earliest (default latest).",
        "sink": "Where a new subscription starts: latest (default, as in Pulsar) or earliest.",
    },
    "POSITION",
    INPUT_PANEL,
    aliases=("--subs-position",),
)
_SERDE = "auto, bytes, string, json or module.Class (default auto)."
INPUT_SERDE = Flag(
    "--input-serde",
    _SERDE,
    "SERDE",
    INPUT_PANEL,
)

# --- what they write, and how --------------------------------------------------------

OUTPUT = Flag(
    "--output",
    "Output topic.",
    "TOPIC",
    PROCESSING_PANEL,
    aliases=("-o",),
)
DESTINATION_TOPIC = Flag(
    "--output",
    "The topic records are appended to.",
    "TOPIC",
    OUTPUT_PANEL,
    aliases=("--destination-topic-name",),
)
OUTPUT_SERDE = Flag(
    "--output-serde",
    _SERDE,
    "SERDE",
    PROCESSING_PANEL,
    aliases=("--output-serde-classname",),
)
LOG_TOPIC = Flag(
    "--log-topic",
    "Topic for the function's log.",
    "TOPIC",
    PROCESSING_PANEL,
)
DEAD_LETTER_TOPIC = Flag(
    "--dead-letter-topic",
    "Topic for messages that failed every attempt (needs a retry limit: unset, none does).",
    "TOPIC",
    PROCESSING_PANEL,
)
MAX_MESSAGE_RETRIES = Flag(
    "--max-message-retries",
    "Redeliveries of a failing message before it is dead-lettered (0 to 100; "
    "default: delivered again without end, as in Pulsar).",
    "N",
    PROCESSING_PANEL,
)
PROCESSING_GUARANTEES = Flag(
    "--processing-guarantees",
    "at_least_once, at_most_once or effectively_once (Pulsar's ATLEAST_ONCE too).",
    "GUARANTEE",
    {"function": PROCESSING_PANEL, "source": OUTPUT_PANEL, "sink": INPUT_PANEL},
)
AUTO_CREATE_TOPICS = Flag(
    "--auto-create-topics",
    "Create the function's topics (inputs, output, log, dead letters, publish "
    "targets) on first use, as Pulsar does (default: on, unless the store or "
    "worker turned it off; see `sparkfn topics auto-creation`).",
    panel=PROCESSING_PANEL,
    parses=bool | None,
)
DROP_FAILED_MESSAGES = Flag(
    "--drop-failed-messages",
    "Drop a message that failed every attempt instead of sending it to the "
    "dead-letter topic (default: {tenant}/{namespace}/{name}-DLQ).",
    panel=PROCESSING_PANEL,
    parses=bool | None,
)
RETAIN_ORDERING = Flag(
    "--retain-ordering",
    "Keep partition order (makes a shared subscription failover).",
    panel=PROCESSING_PANEL,
    parses=bool | None,
)
BATCH_SIZE = Flag(
    "--batch-size",
    "Records appended per transaction, at most (1000).",
    "N",
    OUTPUT_PANEL,
)
BATCH_TIMEOUT = Flag(
    "--batch-timeout",
    "How long read or emitted records may wait to be appended (100ms).",
    "DURATION",
    OUTPUT_PANEL,
)

# --- how they run ------------------------------------------------------------------

PARALLELISM = Flag(
    "--parallelism",
    "Number of instances (1 to 256).",
    "N",
    RUN_PANEL,
)
TRIGGER_INTERVAL = Flag(
    "--trigger-interval",
    "Time between micro-batches: 500ms, 2s, 1m (default: as fast as possible).",
    "DURATION",
    RUN_PANEL,
)
MAX_RECORDS_PER_BATCH = Flag(
    "--max-records-per-batch",
    {
        "function": "Cap on the messages of one micro-batch.",
        "sink": "Cap on the records of one micro-batch.",
    },
    "N",
    RUN_PANEL,
)
SPARK_CONF = Flag(
    "--spark-conf",
    "A Spark setting KEY=VALUE; may be repeated.",
    "KEY=VALUE",
    RUN_PANEL,
    parses=list[str] | None,
)
FAILURE_POLICY = Flag(
    "--failure-policy",
    "What happens after an instance dies, as a JSON object: on_failure, on_fatal, "
    "handler, max_restarts, restart_window, backoff_initial, ... (docs/lifecycle.md).",
    "JSON",
    RUN_PANEL,
    read=mapping,
)
POLL_INTERVAL = Flag(
    "--poll-interval",
    "How long to wait after read() found nothing (50ms).",
    "DURATION",
    RUN_PANEL,
)

# The config flags of each kind, in the order of the help.
FUNCTION_CONFIG = (
    TENANT,
    NAMESPACE,
    NAME,
    PY,
    CLASSNAME,
    INPUTS,
    TOPICS_PATTERN,
    OUTPUT,
    LOG_TOPIC,
    DEAD_LETTER_TOPIC,
    MAX_MESSAGE_RETRIES,
    PROCESSING_GUARANTEES,
    SUBSCRIPTION_TYPE,
    SUBSCRIPTION_POSITION,
    SUBSCRIPTION_NAME,
    PARALLELISM,
    USER_CONFIG,
    SECRETS,
    RETAIN_ORDERING,
    AUTO_CREATE_TOPICS,
    DROP_FAILED_MESSAGES,
    PULSAR_COMPAT,
    TRIGGER_INTERVAL,
    MAX_RECORDS_PER_BATCH,
    SPARK_CONF,
    FAILURE_POLICY,
    INPUT_SERDE,
    OUTPUT_SERDE,
    *PULSAR_FUNCTION_CONFIG,
)
SOURCE_CONFIG = (
    TENANT,
    NAMESPACE,
    NAME,
    SOURCE_TYPE,
    PY,
    CLASSNAME,
    SOURCE_CONFIGS,
    SECRETS,
    DESTINATION_TOPIC,
    PROCESSING_GUARANTEES,
    BATCH_SIZE,
    BATCH_TIMEOUT,
    POLL_INTERVAL,
    PARALLELISM,
    *PULSAR_SOURCE_CONFIG,
)
SINK_CONFIG = (
    TENANT,
    NAMESPACE,
    NAME,
    SINK_TYPE,
    PY,
    CLASSNAME,
    SINK_CONFIGS,
    SECRETS,
    INPUTS,
    SUBSCRIPTION_NAME,
    SUBSCRIPTION_POSITION,
    PROCESSING_GUARANTEES,
    DEAD_LETTER_TOPIC,
    RETAIN_ORDERING,
    PARALLELISM,
    MAX_RECORDS_PER_BATCH,
    TRIGGER_INTERVAL,
    FAILURE_POLICY,
    *PULSAR_SINK_CONFIG,
)
