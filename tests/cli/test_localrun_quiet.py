"""What ``localrun`` and ``create`` print besides their own lines: nothing of YAML's, the JVM's or log4j's.

A bad ``--user-config`` is one usage error naming the flag, for a local run
and a submission alike; a ``spark://`` master that is not there is one error
line in seconds, not a minute of Spark's retries and Java stack traces; and
a run that works says only what sparkfn says, unless ``--verbose`` (or
``SPARKFN_VERBOSE=1``, for Python code such as the README's snippets). The
quiet and the ``--verbose`` localrun are checked on the two runs of
``test_functions_cli.py``'s drained-run test, which start a JVM each anyway.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import Cli

REPO = Path(__file__).resolve().parents[2]
EXCLAMATION = str(REPO / "examples" / "exclamation.py")
SPARK_RUN_TIMEOUT = 240.0  # a cold JVM on a loaded two-core machine, plus the run


@pytest.mark.parametrize("command", ["localrun", "create"])
def test_a_bad_user_config_is_one_error_line_naming_the_flag(cli: Cli, command: str) -> None:
    cli.ok("topics", "create", "in")
    args = ["--py", EXCLAMATION, "--inputs", "in", "--user-config", "{bad"]
    if command == "create":
        args += ["--url", "http://127.0.0.1:9"]  # refused before any request is sent
    result = cli.fail("functions", command, *args)
    assert result.code == 2, result.describe()
    assert result.stderr == (
        "error [usage_error]: Invalid value for '--user-config': neither JSON nor YAML: "
        "expected ',' or '}', but got '<stream end>' at line 1, column 5\n"
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nobody listens once it is closed


def test_an_unreachable_spark_master_is_one_line_in_seconds(cli: Cli) -> None:
    cli.ok("topics", "create", "in")
    master = f"spark://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    result = cli.run(
        "functions", "localrun", "--py", EXCLAMATION, "--inputs", "in",
        "--until-drained", "--spark-master", master,
    )  # fmt: skip
    took = time.monotonic() - started

    assert result.code == 1, result.describe()
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("starting function"), result.describe()
    assert lines[1].startswith("error [") and f"no Spark master answers at {master}" in lines[1]
    assert took < 30, f"took {took:.1f} s"


@pytest.mark.slow
@pytest.mark.long_running(20)
def test_a_spark_session_from_python_starts_quietly(cli: Cli) -> None:
    code = "from sparkfn import spark_session\nspark_session('local[1]').stop()\n"
    ran = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=cli.env,
        timeout=SPARK_RUN_TIMEOUT,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == ""
