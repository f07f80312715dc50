"""Options declared once (cli/flags.py, cli/options.py) and the config built from them."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sparkfn.api.errors import ConfigError
from sparkfn.cli.configs import build_config
from sparkfn.cli.flags import Flag, takes
from sparkfn.cli.localrun import CONFIG_FILE, SIGTERM
from sparkfn.cli.options import FUNCTION_CONFIG, NAME
from sparkfn.config.connector import SinkConfig
from sparkfn.config.function import FunctionConfig

ARGS = [
    "--inputs", "a,b", "--inputs", "c",
    "--secrets", '{"token": "t"}',
    "--retain-ordering",
    "--no-pulsar-compat",
    "--parallelism", "3",
    "--spark-conf", "spark.x=1",
]  # fmt: skip


def _app_taking(flags: tuple[Flag, ...], seen: list[dict[str, Any]]) -> typer.Typer:
    """Two commands taking the same flags, as ``localrun`` and a worker's ``create`` will."""
    app = typer.Typer()
    for name in ("localrun", "create"):

        @app.command(name)
        @takes("function", flags)
        def command(ctx: typer.Context, fields: dict[str, Any], **own: Any) -> None:
            seen.append({**fields, **own})

    return app


def test_one_declaration_gives_every_command_the_same_option_and_value() -> None:
    seen: list[dict[str, Any]] = []
    app = _app_taking((*FUNCTION_CONFIG, SIGTERM), seen)
    for command in ("localrun", "create"):
        result = CliRunner().invoke(app, [command, *ARGS, "--sigterm", "Suspend"])
        assert result.exit_code == 0, result.output
    assert seen[0] == seen[1]
    fields = seen[0]
    assert fields["inputs"] == ["a", "b", "c"]  # comma-separated and repeatable
    assert fields["secrets"] == {"token": "t"}  # a JSON object is read as one
    assert fields["retain_ordering"] is True and fields["pulsar_compat"] is False
    assert fields["auto_create_topics"] is None  # a switch not given is unset
    assert fields["parallelism"] == "3"  # text: the config model validates it
    assert fields["spark_conf"] == ["spark.x=1"]
    assert fields["sigterm"] == "suspend"  # the command's own option, read


def test_help_text_and_names_follow_the_kind_of_command() -> None:
    option = CONFIG_FILE.parameter("sink").default
    assert option.param_decls == ("--sink-config-file",)
    assert option.help == "YAML sink config (Pulsar's camelCase keys too); flags override it."
    assert option.rich_help_panel == "Sink"
    assert NAME.parameter("function").default.help.startswith("Function name (default: ")
    assert NAME.parameter("source").default.help.endswith("else the --source-type).")


def test_flag_text_becomes_what_the_model_fields_want() -> None:
    fields = {
        "sink_type": "file",
        "inputs": ["in"],
        "parallelism": " 2",
        "subscription_position": "Latest",
        "processing_guarantees": "ATLEAST_ONCE",
        "name": None,
    }
    sink = build_config(SinkConfig, "sink", fields, None, "sink_type")
    assert (sink.name, sink.parallelism) == ("file", 2)  # named after its type
    assert (sink.subscription_position, sink.processing_guarantees) == ("latest", "at_least_once")
    function = build_config(
        FunctionConfig,
        "function",
        {"py": "f.py", "inputs": ["in"], "spark_conf": ["a=1", "b=x=y"]},
        None,
    )
    assert function.spark_conf == {"a": "1", "b": "x=y"}


def test_a_bad_key_value_setting_is_a_config_error_naming_the_function() -> None:
    with pytest.raises(ConfigError, match="function upper: invalid config: spark_conf: 'a' must"):
        build_config(FunctionConfig, "function", {"py": "upper.py", "spark_conf": ["a"]}, None)
