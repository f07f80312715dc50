"""``pulsar-admin functions`` flags that sparkfn has no flag of its own for, declared once.

Pulsar's ``CmdFunctions`` gives ``localrun``, ``create`` and ``update`` the
flags of a function's config; :data:`PULSAR_FUNCTION_CONFIG` are the ones
sparkfn does not spell as its own flag (``--custom-serde-inputs``,
``--timeout-ms``, ``--cpu``, ...). They join sparkfn's in
:data:`sparkfn.cli.options.FUNCTION_CONFIG`, so every command that takes a
function's config takes them with Pulsar's meaning. A flag's value is the
Pulsar field of the same name; :func:`sparkfn.cli.configs.function_layers`
folds them as ``pulsar-admin`` does (``--cpu`` into ``resources``, the window
flags into ``windowConfig``: :func:`sparkfn.cli.configs.fold_flags`) and
:mod:`sparkfn.config.pulsar` reads the
result, so a flag and the YAML field it sets behave alike, warnings included.

:data:`PULSAR_LOCALRUN` are Pulsar's ``localrun``-only flags (a broker's URL,
TLS, ...): accepted, and each one given is a warning saying why it means
nothing here (:func:`localrun_warnings`). :data:`UPDATE_AUTH_DATA` is
``update``'s. Pulsar's deprecated camelCase spellings (``--className``,
``--autoAck``, ...) are accepted and hidden from the help, as Pulsar hides
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkfn.cli.configs import mapping
from sparkfn.cli.flags import INPUT_PANEL, PROCESSING_PANEL, RUN_PANEL, Flag

PULSAR_PANEL = "Pulsar (accepted; what each means here: docs/pulsar-migration.md)"
_SWITCH = bool | None


def _flag(
    name: str,
    help_text: str,
    metavar: str | None = None,
    panel: str = PULSAR_PANEL,
    **kw: Any,
) -> Flag:
    return Flag(name, help_text, metavar, panel, **kw)


def _hidden(name: str, parses: Any = str | None, *, dest: str = "", config: bool = True) -> Flag:
    """A deprecated spelling, hidden; a config flag's value is the field Pulsar spells ``name``."""
    return Flag(
        name,
        "",
        parses=parses,
        config=config,
        dest=dest or name.lstrip("-"),
        typer_settings={"hidden": True},
    )


# --- the function's config: create, update and localrun alike ---------------------------

FQFN = _flag("--fqfn", "tenant/namespace/name, instead of the three flags.", "FQFN", "{Kind}")
CUSTOM_SERDE_INPUTS = _flag(
    "--custom-serde-inputs",
    "Input topic -> serde class, a JSON object; each topic is an input.",
    "JSON",
    INPUT_PANEL,
    read=mapping,
)
CUSTOM_SCHEMA_INPUTS = _flag(
    "--custom-schema-inputs",
    "Input topic -> schema type (STRING, JSON, AVRO, BYTES or a Record class), a JSON object.",
    "JSON",
    INPUT_PANEL,
    read=mapping,
)
INPUT_SPECS = _flag(
    "--input-specs",
    "Input topic -> {serdeClassName, schemaType, regexPattern, ...}, a JSON object.",
    "JSON",
    INPUT_PANEL,
    read=mapping,
)
SCHEMA_TYPE = _flag(
    "--schema-type",
    "The output's schema type (STRING, JSON, AVRO, BYTES or a Record class).",
    "TYPE",
    PROCESSING_PANEL,
    aliases=("-st",),
    dest="output_schema_type",
)
RETAIN_KEY_ORDERING = _flag(
    "--retain-key-ordering",
    "Keep per-key order (makes a shared subscription key_shared).",
    panel=PROCESSING_PANEL,
    parses=_SWITCH,
)
FORWARD_SOURCE_MESSAGE_PROPERTY = _flag(
    "--forward-source-message-property",
    "true or false: a result's message carries its input's properties (default true).",
    "BOOL",
    PROCESSING_PANEL,
)
AUTO_ACK = _flag(
    "--auto-ack",
    "true or false: acknowledge each message when process returns (default true); with "
    "false the function acknowledges through context.ack, and an unacknowledged message "
    "is redelivered.",
    "BOOL",
    PROCESSING_PANEL,
)
CLEANUP_SUBSCRIPTION = _flag(
    "--cleanup-subscription",
    "Delete the subscription when the function is deleted (default: delete).",
    panel=INPUT_PANEL,
    parses=_SWITCH,
)
SECRETS_PROVIDER_CLASSNAME = _flag(
    "--secrets-provider-classname",
    "What get_secret makes of a secret: ClearTextSecretsProvider, SecretReferenceProvider, "
    "EnvironmentBasedSecretsProvider or module.Class.",
    "CLASS",
    "{Kind}",
)
SECRETS_PROVIDER_CONFIG = _flag(
    "--secrets-provider-config",
    "What the secrets provider's init() receives, a JSON object.",
    "JSON",
    "{Kind}",
    read=mapping,
)
CPU = _flag("--cpu", "Cores per instance: spark.task.cpus, rounded up.", "CORES", RUN_PANEL)
RAM = _flag("--ram", "Bytes per instance: spark.executor.pyspark.memory.", "BYTES", RUN_PANEL)
DISK = _flag("--disk", "Bytes of disk per instance; ignored: Spark has no such allotment.", "BYTES")

TIMEOUT_MS = _flag(
    "--timeout-ms",
    "An attempt at a message that runs longer fails (retried, then dead-lettered).",
    "MS",
    PROCESSING_PANEL,
)
PRODUCER_CONFIG = _flag(
    "--producer-config",
    "Pulsar's producer settings, a JSON object: compressionType is honoured, settings "
    "sparkfn cannot honour are refused (docs/functions.md).",
    "JSON",
    PROCESSING_PANEL,
    read=mapping,
)
# Pulsar's window flags, and sparkfn's for the rest of windowConfig (Pulsar's CLI has
# none): folded into windowConfig (sparkfn.cli.configs.fold_flags).
WINDOW_PANEL = "Windows (windowConfig: docs/functions.md)"
WINDOW_CONFIG = (
    _flag("--window-length-count", "Messages per window.", "N", WINDOW_PANEL),
    _flag("--window-length-duration-ms", "A window's length in time.", "MS", WINDOW_PANEL),
    _flag(
        "--sliding-interval-count",
        "Messages from one window to the next (default: the length, tumbling).",
        "N",
        WINDOW_PANEL,
    ),
    _flag(
        "--sliding-interval-duration-ms",
        "Time from one window to the next (default: the length, tumbling).",
        "MS",
        WINDOW_PANEL,
    ),
    _flag(
        "--timestamp-extractor-classname",
        "module.Class giving a message's event time (event-time windows); "
        "sparkfn.api.window.MessageEventTime: the message's own.",
        "CLASS",
        WINDOW_PANEL,
    ),
    _flag(
        "--max-lag-ms",
        "How far the watermark trails the latest event time seen (default 0).",
        "MS",
        WINDOW_PANEL,
        aliases=("--max-lateness-ms",),
    ),
    _flag(
        "--watermark-emit-interval-ms",
        "The least time between two watermark advances (default 1000).",
        "MS",
        WINDOW_PANEL,
    ),
    _flag(
        "--late-data-topic",
        "Where late messages go (default: NAME-late, created on first use).",
        "TOPIC",
        WINDOW_PANEL,
    ),
    _flag(
        "--drop-late-data",
        "Drop late messages instead of sending them to the late-data topic.",
        panel=WINDOW_PANEL,
        parses=_SWITCH,
    ),
)

# Pulsar's flags that mean nothing on Spark: config/pulsar_fields.py says why in the warning.
_IGNORED_CONFIG = (
    ("-t", "--function-type", "A built-in Pulsar function.", "TYPE", "function_type"),
    ("", "--jar", "A Java function's jar.", "PATH", ""),
    ("", "--go", "A Go function's executable.", "PATH", ""),
    ("", "--custom-schema-outputs", "Output schema properties, a JSON object.", "JSON", ""),
    ("", "--input-type-class-name", "A Java input type.", "CLASS", ""),
    ("", "--output-type-class-name", "A Java output type.", "CLASS", ""),
    ("", "--batch-builder", "DEFAULT or KEY_BASED producer batching.", "BUILDER", ""),
    ("", "--skip-to-latest", "true or false: skip to the latest message on restart.", "BOOL", ""),
    ("", "--custom-runtime-options", "Options of Pulsar's Kubernetes runtime.", "TEXT", ""),
    ("", "--runtime-flags", "Flags of Pulsar's process runtime.", "FLAGS", ""),
)
IGNORED_CONFIG = tuple(
    _flag(
        name,
        f"{text} Pulsar's; ignored.",
        metavar,
        aliases=(short,) if short else (),
        dest=dest,
        read=mapping if metavar == "JSON" else None,
    )
    for short, name, text, metavar, dest in _IGNORED_CONFIG
)
# Pulsar's deprecated camelCase spellings, hidden as in Pulsar.
DEPRECATED_CONFIG = (
    _hidden("--className"),
    _hidden("--topicsPattern"),
    _hidden("--logTopic"),
    _hidden("--customSerdeInputs"),
    _hidden("--outputSerdeClassName"),
    _hidden("--processingGuarantees"),
    _hidden("--userConfig"),
    _hidden("--retainOrdering", _SWITCH),
    _hidden("--windowLengthCount"),
    _hidden("--windowLengthDurationMs"),
    _hidden("--slidingIntervalCount"),
    _hidden("--slidingIntervalDurationMs"),
    _hidden("--autoAck", _SWITCH),
    _hidden("--timeoutMs"),
)
PULSAR_FUNCTION_CONFIG = (
    FQFN,
    CUSTOM_SERDE_INPUTS,
    CUSTOM_SCHEMA_INPUTS,
    INPUT_SPECS,
    CLEANUP_SUBSCRIPTION,
    SCHEMA_TYPE,
    RETAIN_KEY_ORDERING,
    FORWARD_SOURCE_MESSAGE_PROPERTY,
    AUTO_ACK,
    SECRETS_PROVIDER_CLASSNAME,
    SECRETS_PROVIDER_CONFIG,
    CPU,
    RAM,
    DISK,
    TIMEOUT_MS,
    PRODUCER_CONFIG,
    *WINDOW_CONFIG,
    *IGNORED_CONFIG,
    *DEPRECATED_CONFIG,
)

# --- a connector's: pulsar-admin sinks and sources ---------------------------------------

# Pulsar's sink flags: --max-redeliver-count, --negative-ack-redelivery-delay-ms, --dead-letter-
# topic act as for a function (a failed write); the rest is warned about (pulsar_connector.py).
_NO_EFFECT = "Pulsar's; no effect here (docs/pulsar-migration.md)."
PULSAR_SINK_CONFIG = (
    _flag(
        "--max-redeliver-count",
        "Redeliveries of a failed write before the dead letter (0-100; default: without end).",
        "N",
        INPUT_PANEL,
    ),
    CUSTOM_SERDE_INPUTS,
    _flag("--auto-ack", f"true or false. {_NO_EFFECT}", "BOOL", INPUT_PANEL),
    _flag("--timeout-ms", f"The message timeout. {_NO_EFFECT}", "MS", INPUT_PANEL),
    _flag(
        "--negative-ack-redelivery-delay-ms",
        "How long a message whose write failed waits before it is delivered again (default 60000).",
        "MS",
        INPUT_PANEL,
    ),
    _flag(
        "--cleanup-subscription",
        "Delete the subscription with the sink; a deleted sink's always is.",
        panel=INPUT_PANEL,
        parses=_SWITCH,
    ),
    _flag("--cpu", f"Cores per instance. {_NO_EFFECT}", "CORES", RUN_PANEL),
    _flag("--ram", f"Bytes per instance. {_NO_EFFECT}", "BYTES", RUN_PANEL),
    _flag("--disk", f"Disk bytes per instance. {_NO_EFFECT}", "BYTES", RUN_PANEL),
)
PULSAR_SOURCE_CONFIG = (
    _flag(
        "--schema-type",
        f"The output's schema type. {_NO_EFFECT}",
        "TYPE",
        aliases=("-st",),
    ),
    _flag(
        "--deserialization-classname",
        f"The SerDe class of the records. {_NO_EFFECT}",
        "CLASS",
        dest="serde_class_name",
    ),
    _flag(
        "--producer-config",
        f"Pulsar's producer settings, a JSON object. {_NO_EFFECT}",
        "JSON",
        read=mapping,
    ),
    _flag("--batch-builder", f"DEFAULT or KEY_BASED. {_NO_EFFECT}", "BUILDER"),
    _flag("--cpu", f"Cores per instance. {_NO_EFFECT}", "CORES", RUN_PANEL),
    _flag("--ram", f"Bytes per instance. {_NO_EFFECT}", "BYTES", RUN_PANEL),
    _flag("--disk", f"Disk bytes per instance. {_NO_EFFECT}", "BYTES", RUN_PANEL),
)

# --- localrun's own: how Pulsar's local runner reaches a cluster -----------------------

_NO_BROKER = (
    "sparkfn localrun reads and writes the store (--store-url, --data-dir); there is no broker"
)
_LOCALRUN = {
    "--state-storage-service-url": ("URL", "state lives in the store"),
    "--broker-service-url": ("URL", _NO_BROKER),
    "--web-service-url": ("URL", _NO_BROKER),
    "--client-auth-plugin": ("CLASS", _NO_BROKER),
    "--client-auth-params": ("PARAMS", _NO_BROKER),
    "--tls-trust-cert-path": ("PATH", _NO_BROKER),
    "--use-tls": (None, _NO_BROKER),
    "--tls-allow-insecure": (None, _NO_BROKER),
    "--hostname-verification-enabled": (None, _NO_BROKER),
    "--runtime": ("RUNTIME", "instances run as Spark tasks, neither threads nor processes"),
    "--instance-id-offset": (
        "N",
        "one localrun runs every instance of the function, ids 0 to parallelism-1",
    ),
}
# Deprecated spelling -> the flag it stands for.
_LOCALRUN_DEPRECATED = {
    "--stateStorageServiceUrl": "--state-storage-service-url",
    "--brokerServiceUrl": "--broker-service-url",
    "--clientAuthPlugin": "--client-auth-plugin",
    "--clientAuthParams": "--client-auth-params",
    "--use_tls": "--use-tls",
    "--tls_allow_insecure": "--tls-allow-insecure",
    "--hostname_verification_enabled": "--hostname-verification-enabled",
    "--tls_trust_cert_path": "--tls-trust-cert-path",
    "--instanceIdOffset": "--instance-id-offset",
}
METRICS_PORT_START = _flag(
    "--metrics-port-start",
    "Pulsar's: the --metrics-port, when that is not given.",
    "PORT",
    RUN_PANEL,
    config=False,
)
FUNCTION_CONFIG_FILE = _hidden("--functionConfigFile", Path | None, config=False)
PULSAR_LOCALRUN = (
    *(
        _flag(
            name,
            "Pulsar's; ignored.",
            metavar,
            parses=str | None if metavar else _SWITCH,
            config=False,
        )
        for name, (metavar, _) in _LOCALRUN.items()
    ),
    METRICS_PORT_START,
    *(
        _hidden(
            name,
            str | None if _LOCALRUN[new][0] else _SWITCH,
            dest="deprecated_" + name.lstrip("-"),
            config=False,
        )
        for name, new in _LOCALRUN_DEPRECATED.items()
    ),
    FUNCTION_CONFIG_FILE,
)
UPDATE_AUTH_DATA = _flag(
    "--update-auth-data",
    "Pulsar's update flag; ignored: a function keeps no auth data of its caller.",
    parses=_SWITCH,
    config=False,
)


def localrun_warnings(given: Mapping[str, Any]) -> list[str]:
    """One line per Pulsar localrun flag in ``given`` (by its argument name), saying why it
    is ignored."""
    warnings = []
    for flag in PULSAR_LOCALRUN:
        if flag in (METRICS_PORT_START, FUNCTION_CONFIG_FILE) or given.get(flag.key) is None:
            continue
        name = _LOCALRUN_DEPRECATED.get(flag.name, flag.name)
        warnings.append(f"{flag.name}: {_LOCALRUN[name][1]}; ignored")
    return warnings
