"""What the localrun commands share: flag values, default names, stop signals."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import typer

from sparkfn.cli.configs import config_fields, default_name, enum_value, mapping, split_topics
from sparkfn.cli.running import StopSignals, stop_mode


def test_stop_mode_takes_any_case_and_names_the_flag_otherwise() -> None:
    assert stop_mode(" Suspend ") == "suspend"
    with pytest.raises(typer.BadParameter, match="'later' is not one of: drain, suspend, cancel"):
        stop_mode("later")


def test_flag_values_are_read_as_the_configs_expect() -> None:
    assert split_topics(["a, b", "c", ""]) == ["a", "b", "c"]
    assert split_topics(None) is None
    assert mapping('{"a": 1}') == {"a": 1}
    assert mapping("a: 1\nb: [2]") == {"a": 1, "b": [2]}
    # Not an object: unchanged, so the config rejects it naming the field and the value.
    assert mapping("[1, 2]") == "[1, 2]"
    assert mapping("{unclosed") == "{unclosed"
    allowed = ["at_least_once", "key_shared"]
    assert enum_value("ATLEAST_ONCE", allowed) == "at_least_once"
    assert enum_value("Key-Shared", allowed) == "key_shared"
    assert enum_value("sometimes", allowed) == "sometimes"
    fields = config_fields(
        {
            "parallelism": " 4",
            "retries": "-1",
            "batch": "x",
            "guarantee": "Atleast_Once",
            "n": None,
        },
        integers=["parallelism", "retries", "batch"],
        enums={"guarantee": allowed},
    )
    assert fields == {"parallelism": 4, "retries": -1, "batch": "x", "guarantee": "at_least_once"}


def test_default_names_follow_pulsar_then_the_file_then_the_type(tmp_path: Path) -> None:
    def named(fields: dict[str, str], config_file: Path | None = None) -> str | None:
        default_name(fields, config_file, "sink_type")
        return fields.get("name")

    assert named({"classname": "pkg.mod.Archive", "py": "x/other.py"}) == "Archive"
    assert named({"py": "x/lines.py", "sink_type": "file"}) == "lines"
    assert named({"sink_type": "postgres"}) == "postgres"
    assert named({"name": "given", "classname": "a.B"}) == "given"
    assert named({}) is None
    from_file = tmp_path / "sink.yaml"
    from_file.write_text("className: pkg.Writer\nsinkType: file\n")
    assert named({}, from_file) == "Writer"
    from_file.write_text("name: kept\n")
    assert named({"py": "x.py"}, from_file) is None  # the file's own name stands
    from_file.write_text(": not yaml [")
    assert named({"py": "x.py"}, from_file) == "x"  # reading it for real reports the error


def test_signals_drain_then_cancel_then_give_up() -> None:
    signals = StopSignals(sigterm_mode="suspend")
    signals.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.requests == [("suspend", "SIGTERM")] and signals.wake.is_set()
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.requests[-1] == ("cancel", "SIGINT")
        assert signals.names() == "SIGTERM, SIGINT"
        with pytest.raises(typer.Abort):
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        signals.restore()
    assert signal.getsignal(signal.SIGTERM) is not signals._handle


def test_the_first_ctrl_c_drains_whatever_sigterm_means() -> None:
    original = signal.getsignal(signal.SIGINT)  # pyspark's, once a SparkContext exists here
    signals = StopSignals(sigterm_mode="cancel")
    signals.install()
    signals.install()  # again, as after SparkContext took SIGINT: restore still finds the original
    try:
        os.kill(os.getpid(), signal.SIGINT)
    finally:
        signals.restore()
    assert signals.requests == [("drain", "SIGINT")]
    assert signal.getsignal(signal.SIGINT) is original
