"""``sparkfn functions localrun``, run as a user runs it: a child process with its own JVM.

Mistakes (bad fields, bad code, missing topics) are caught before Spark
starts, so those tests are cheap. Four tests start Spark, ~20-60 s each on
a busy machine: a drained run and a second one with nothing to do (which
also check what localrun prints quietly and with ``--verbose``, and that a
second run counts only its own messages), a run from a YAML file with a
dead letter topic, a function that fails, and a long run watched through
Prometheus and stopped with Ctrl+C to its process group (which also checks
that such a stop leaves no process behind). Each JVM a test starts costs
seconds of CPU, so a test checks every promise its runs can show.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Cli
from prometheus_client.parser import text_string_to_metric_families
from test_localrun_ending import NOT_SAID, nothing_left, session_processes

from waiting import until

REPO = Path(__file__).resolve().parents[2]
EXCLAMATION = str(REPO / "examples" / "exclamation.py")
# A cold JVM on a loaded two-core machine, plus the run itself.
SPARK_RUN_TIMEOUT = 240.0
# Stopping the query and Spark after Ctrl+C.
STOP_TIMEOUT = 60.0

BROKEN_IMPORT = "import no_such_module_for_sparkfn_tests\n\ndef process(input):\n    return input\n"
REJECTS_BAD = """
def process(input):
    if input.startswith("bad"):
        raise ValueError(f"cannot handle {input!r}")
    return input.upper()
"""
FAILS_TO_INITIALIZE = """
from sparkfn import Function

class Broken(Function):
    def initialize(self, context):
        raise RuntimeError("the database is unreachable")

    def process(self, input, context):
        return input
"""


def _topics(cli: Cli, *names: str, partitions: int = 2) -> None:
    for name in names:
        cli.ok("topics", "create", name, "-p", str(partitions), "--schema-type", "string")


def _produce(cli: Cli, topic: str, values: list[str]) -> None:
    cli.ok(
        "topics", "produce", topic, "--file", "-", stdin="".join(f"{v}\n" for v in values).encode()
    )


def _consume(cli: Cli, topic: str) -> list[dict[str, Any]]:
    result = cli.ok("topics", "consume", topic, "--json", "--position", "earliest")
    return [json.loads(line) for line in result.lines]


def _status(result_stdout: str) -> dict[str, Any]:
    lines = [line for line in result_stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"--json-status must print exactly one line on stdout: {lines}"
    status: dict[str, Any] = json.loads(lines[0])
    return status


def _total(status: dict[str, Any], key: str) -> int:
    return sum(int(i["status"][key]) for i in status["instances"])


def _run_spark(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli.command(["functions", "localrun", *args]),
        capture_output=True,
        text=True,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        timeout=SPARK_RUN_TIMEOUT,
        check=False,
    )


def _assert_no_traceback_of_ours(stderr: str) -> None:
    """No exception escaped the command.

    Spark's log on the same stderr may hold tracebacks that are not ours: a
    failed worker's (shown for debugging) or, when a query is stopped
    mid-batch, pyspark's accumulator server reporting the closed connection.
    """
    assert "─ Traceback" not in stderr, stderr  # Typer's report of an uncaught exception
    assert "sparkfn/cli/" not in stderr, stderr


def _describe(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"


# --- cheap: everything that fails before Spark starts ------------------------------


def test_help_lists_every_config_flag(cli: Cli) -> None:
    text = cli.ok("functions", "localrun", "--help").stdout
    for flag in (
        "--tenant",
        "--namespace",
        "--name",
        "--py",
        "--classname",
        "--inputs",
        "--topics-pattern",
        "--output",
        "--log-topic",
        "--dead-letter-topic",
        "--max-message-retries",
        "--processing-guarantees",
        "--subscription-type",
        "--subscription-position",
        "--subscription-name",
        "--parallelism",
        "--user-config",
        "--secrets",
        "--retain-ordering",
        "--auto-create-topics",
        "--pulsar-compat",
        "--trigger-interval",
        "--max-records-per-batch",
        "--spark-conf",
        "--input-serde",
        "--output-serde",
        "--function-config-file",
        "--until-drained",
        "--spark-master",
        "SPARKFN_SPARK_MASTER",
        "--metrics-port",
        "--json-status",
    ):
        assert flag in text, f"{flag} is missing from the help"


@pytest.mark.parametrize(
    ("extra", "reason", "expected"),
    [
        pytest.param(
            ["--parallelism", "0"],
            "invalid_config",
            # No --name: named after the class, as Pulsar does.
            "error [invalid_config]: function process: invalid config: parallelism: "
            "Input should be greater than or equal to 1 (got 0)",
            id="parallelism",
        ),
        pytest.param(
            ["--processing-guarantees", "twice"],
            "invalid_config",
            "error [invalid_config]: function process: invalid config: processing_guarantees: "
            "Input should be 'at_least_once', 'at_most_once' or 'effectively_once' (got 'twice')",
            id="processing-guarantee",
        ),
        pytest.param(
            ["--max-message-retries", "many", "--subscription-type", "round_robin"],
            "invalid_config",
            "error [invalid_config]: function process: invalid config: max_message_retries: "
            "Input should be a valid integer (got 'many'); "
            "subscription_type: Input should be 'shared', 'key_shared' or 'failover' "
            "(got 'round_robin')",
            id="every-bad-field-named",
        ),
        pytest.param(
            ["--spark-conf", "spark.sql.shuffle.partitions"],
            "invalid_config",
            "error [invalid_config]: function process: invalid config: spark_conf: "
            "'spark.sql.shuffle.partitions' must have the form KEY=VALUE",
            id="spark-conf",
        ),
        pytest.param(
            ["--classname", "exclamation.shout"],
            "function_load_error",
            "error [function_load_error]: function public/default/shout: classname "
            "'exclamation.shout': module exclamation has no 'shout' (it defines: process)",
            id="wrong-classname",
        ),
        pytest.param(
            ["--inputs", "nowhere", "--no-auto-create-topics"],
            "invalid_config",
            "error [invalid_config]: function public/default/process: inputs topic "
            "public/default/nowhere does not exist; create it first (topics are not "
            "created on first use here)",
            id="unknown-input-topic",
        ),
        pytest.param(
            ["--output", "public/default/void", "--no-auto-create-topics"],
            "invalid_config",
            "error [invalid_config]: function public/default/process: output topic "
            "public/default/void does not exist; create it first (topics are not "
            "created on first use here)",
            id="unknown-output-topic",
        ),
    ],
)
def test_a_bad_config_is_one_error_line_before_spark_starts(
    cli: Cli, extra: list[str], reason: str, expected: str
) -> None:
    _topics(cli, "in", "out")
    args = ["--py", EXCLAMATION, "--classname", "exclamation.process"]
    args += ["--inputs", "in", "--output", "out", *extra]
    result = cli.fail("functions", "localrun", *args)
    assert result.code == 1, result.describe()
    assert result.stderr.startswith(expected), result.describe()
    assert f"error [{reason}]" in result.stderr


def test_a_missing_py_file_is_named(cli: Cli, tmp_path: Path) -> None:
    _topics(cli, "in")
    missing = tmp_path / "nowhere.py"
    result = cli.fail(
        "functions", "localrun", "--name", "f", "--py", str(missing), "--inputs", "in"
    )
    assert result.stderr == (
        f"error [function_load_error]: function public/default/f: py file '{missing}' "
        "does not exist\n"
    )


def test_an_import_error_in_user_code_is_named(cli: Cli, tmp_path: Path) -> None:
    _topics(cli, "in")
    broken = tmp_path / "broken_import.py"
    broken.write_text(BROKEN_IMPORT)
    result = cli.fail("functions", "localrun", "--py", str(broken), "--inputs", "in")
    # No --name and no --classname: named after the file.
    assert result.stderr == (
        "error [function_load_error]: function public/default/broken_import: importing "
        "broken_import.py failed: ModuleNotFoundError: No module named "
        "'no_such_module_for_sparkfn_tests'\n"
    )


def test_bad_fields_in_a_config_file_are_named(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "fn.yaml"
    config.write_text(
        f"name: shout\npy: {EXCLAMATION}\ninputs: [in]\nparallelism: -2\nprocessingGuarantees: sometimes\n"
    )
    result = cli.fail("functions", "localrun", "--function-config-file", str(config))
    assert result.stderr == (
        "error [invalid_config]: function shout: invalid config: processing_guarantees: Input "
        "should be 'at_least_once', 'at_most_once' or 'effectively_once' (got 'sometimes'); "
        "parallelism: Input should be greater than or equal to 1 (got -2)\n"
    )
    # A flag overrides the file, and its value is what is checked.
    result = cli.fail(
        "functions",
        "localrun",
        "--function-config-file",
        str(config),
        "--parallelism",
        "2",
        "--processing-guarantees",
        "ATMOST_ONCE",
        "--no-auto-create-topics",
    )
    assert result.stderr == (
        "error [invalid_config]: function public/default/shout: inputs topic "
        "public/default/in does not exist; create it first (topics are not created on "
        "first use here)\n"
    )


def test_a_busy_metrics_port_is_one_error_line(cli: Cli) -> None:
    _topics(cli, "in")
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli.fail(
            "functions", "localrun", "--py", EXCLAMATION, "--inputs", "in",
            "--metrics-port", str(port),
        )  # fmt: skip
    assert result.stderr.startswith(
        f"error [invalid_config]: function public/default/exclamation: cannot serve metrics "
        f"on 0.0.0.0:{port}: "
    ), result.describe()


# --- with Spark ---------------------------------------------------------------------


def _drain_exclaim(cli: Cli, *extra: str) -> subprocess.CompletedProcess[str]:
    return _run_spark(
        cli,
        "--py", EXCLAMATION,
        "--classname", "exclamation.process",
        "--name", "exclaim",
        "--inputs", "in",
        "--output", "out",
        "--parallelism", "2",
        "--subscription-position", "earliest",
        "--until-drained",
        "--json-status",
        *extra,
    )  # fmt: skip


def _noise(stderr: str) -> list[str]:
    """What the JVM and Spark print unasked on a start: none of it is sparkfn's."""
    marks = ("WARNING: Using incubator modules", "log4j", " WARN ", "setLogLevel", "\tat ")
    return [line for line in stderr.splitlines() if any(mark in line for mark in marks)]


def _final_progress(stderr: str) -> str:
    return [line for line in stderr.splitlines() if "public/default/exclaim STOPPED" in line][-1]


@pytest.mark.slow
@pytest.mark.long_running(40)
def test_localrun_until_drained_processes_everything_then_a_second_run_counts_only_its_own(
    cli: Cli,
) -> None:
    """Two runs of one function, each a JVM of its own: three promises on them.

    * A drained run processes everything and reports its status (the first run).
    * ``localrun`` says only what sparkfn says, none of the JVM's or log4j's
      output, unless ``--verbose`` (the first run quiet, the second verbose).
    * A second run with nothing to do counts nothing and labels the totals
      of every run, which the store keeps (the second run).
    """
    _topics(cli, "in", "out")
    values = [f"hello {i}" for i in range(30)]
    _produce(cli, "in", values)

    done = _drain_exclaim(cli)

    assert done.returncode == 0, _describe(done)
    _assert_no_traceback_of_ours(done.stderr)
    status = _status(done.stdout)
    assert status["numInstances"] == 2
    assert status["numRunning"] == 0
    assert [i["status"]["state"] for i in status["instances"]] == ["STOPPED", "STOPPED"]
    assert _total(status, "numReceived") == 30
    assert _total(status, "numSuccessfullyProcessed") == 30
    assert _total(status, "numUserExceptions") == 0
    assert _total(status, "numSystemExceptions") == 0
    # Both instances got work (2 partitions, shared subscription).
    assert all(i["status"]["numReceived"] > 0 for i in status["instances"])
    # stderr is not a terminal here: plain progress lines, the last one final.
    first = _final_progress(done.stderr)
    assert first.endswith(
        "public/default/exclaim STOPPED: received 30, processed 30, user exceptions 0, "
        "system exceptions 0, dead-lettered 0, avg latency " + first.rsplit("avg latency ", 1)[1]
    ), first
    assert "totals" not in first, first
    assert sorted(m["value"] for m in _consume(cli, "out")) == sorted(f"{v}!" for v in values)
    # Quiet: nothing of the JVM's, Spark's or log4j's; sparkfn's first line first.
    assert _noise(done.stderr) == [], done.stderr
    assert done.stderr.splitlines()[0].startswith("starting function public/default/exclaim")

    again = _drain_exclaim(cli, "--verbose")

    assert again.returncode == 0, _describe(again)
    assert _noise(again.stderr) != [], again.stderr
    second = _final_progress(again.stderr)
    assert "received 0, processed 0," in second, second
    assert second.endswith(
        "(this run; totals of every run: received 30, processed 30, user exceptions 0, "
        "system exceptions 0, dead-lettered 0)"
    ), second


@pytest.mark.slow
@pytest.mark.long_running(25)
def test_localrun_from_a_yaml_file_with_a_dead_letter_topic(cli: Cli, tmp_path: Path) -> None:
    _topics(cli, "words", "upper", "rejected")
    values = ["ok 1", "bad 1", "ok 2", "ok 3", "bad 2"]
    _produce(cli, "words", values)
    code = tmp_path / "rejects_bad.py"
    code.write_text(REJECTS_BAD)
    config = tmp_path / "fn.yaml"
    # Pulsar's camelCase keys; the output given here is overridden by the flag.
    config.write_text(
        "tenant: public\n"
        "namespace: default\n"
        "name: upper\n"
        f"py: {code}\n"
        "className: rejects_bad.process\n"
        "inputs: [words]\n"
        "output: nowhere\n"
        "deadLetterTopic: rejected\n"
        "maxMessageRetries: 1\n"
        "subscriptionPosition: earliest\n"
        "parallelism: 1\n"
    )

    done = _run_spark(
        cli,
        "--function-config-file", str(config),
        "--output", "upper",
        "--until-drained",
        "--json-status",
        "--spark-master", "local[1]",
    )  # fmt: skip

    assert done.returncode == 0, _describe(done)
    status = _status(done.stdout)
    instance = status["instances"][0]["status"]
    assert instance["numReceived"] == 7  # each bad message delivered twice (negative-acked)
    assert instance["numSuccessfullyProcessed"] == 3
    # Each bad message: one attempt and one redelivery, then the dead letter topic.
    assert instance["numUserExceptions"] == 4
    assert instance["numDeadLettered"] == 2
    assert {e["type"] for e in instance["latestUserExceptions"]} == {"ValueError"}
    assert sorted(m["value"] for m in _consume(cli, "upper")) == ["OK 1", "OK 2", "OK 3"]
    dead = _consume(cli, "rejected")
    assert sorted(m["value"] for m in dead) == ["bad 1", "bad 2"]
    assert {m["properties"]["ATTEMPTS"] for m in dead} == {"2"}


@pytest.mark.slow
@pytest.mark.long_running(25)
def test_a_function_that_fails_exits_1_with_the_error(cli: Cli, tmp_path: Path) -> None:
    _topics(cli, "in")
    _produce(cli, "in", ["a", "b"])
    code = tmp_path / "fails_to_initialize.py"
    code.write_text(FAILS_TO_INITIALIZE)

    done = _run_spark(
        cli,
        "--py", str(code),
        "--classname", "fails_to_initialize.Broken",
        "--failure-policy", '{"max_restarts": 0}',
        "--inputs", "in",
        "--subscription-position", "earliest",
        "--until-drained",
        "--json-status",
        "--spark-master", "local[1]",
    )  # fmt: skip

    assert done.returncode == 1, _describe(done)
    _assert_no_traceback_of_ours(done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error [")]
    assert len(errors) == 1, _describe(done)
    # The worker's exception, not Spark's wrapping of it.
    assert errors[0] == (
        "error [function_failed]: function public/default/Broken failed: "
        "RuntimeError: the database is unreachable"
    ), _describe(done)
    assert done.stderr.rstrip().endswith(errors[0])
    status = _status(done.stdout)
    assert status["instances"][0]["status"]["state"] == "ERROR"
    assert status["instances"][0]["status"]["error"] == "RuntimeError: the database is unreachable"


def _localrun_serving_metrics(cli: Cli, *flags: str) -> tuple[int, subprocess.Popen[bytes]]:
    """A ``functions localrun`` with ``--metrics-port`` on a free port, in its own process
    group (which a terminal's Ctrl+C reaches), and the port.

    A port found free can be taken by another process before the run binds it; the run
    binds it before its JVM and ends at once saying so, so that case starts again on
    another port (up to five times) instead of failing the test.
    """
    for _ in range(5):
        port = _free_port()
        proc = cli.popen(
            "functions", "localrun", *flags, "--metrics-port", str(port),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        while proc.poll() is None:
            try:
                _scrape(port)
            except OSError:
                time.sleep(0.1)
                continue
            return port, proc  # listening, and still running: the port is the run's
        errors = proc.communicate()[1].decode()
        assert "in use" in errors, errors  # any other end is the test's failure
    raise AssertionError("five free ports were taken before the run could bind one")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _scrape(port: int) -> dict[tuple[str, str], float]:
    """``{(sample name, instance_id): value}`` from the endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("instance_id", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.slow
@pytest.mark.long_running(25)
def test_a_long_run_serves_metrics_and_stops_cleanly_on_ctrl_c(cli: Cli) -> None:
    """Metrics while it runs; then Ctrl+C to its process group ends it STOPPED, exit 0,
    without a traceback of any process, and leaves no process of its session behind
    (the SIGINT case of ``test_localrun_ending.py``)."""
    _topics(cli, "in", "out")
    _produce(cli, "in", [f"m{i}" for i in range(12)])
    port, proc = _localrun_serving_metrics(
        cli,
        "--py", EXCLAMATION,
        "--name", "watched",
        "--inputs", "in",
        "--output", "out",
        "--parallelism", "2",
        "--subscription-position", "earliest",
        "--trigger-interval", "500ms",
        "--json-status",
    )  # fmt: skip
    try:
        samples: dict[tuple[str, str], float] = {}
        received = 0.0

        def all_received() -> bool:
            nonlocal samples, received
            assert proc.poll() is None, proc.communicate()[1].decode()
            try:
                samples = _scrape(port)
            except OSError:  # not listening yet
                samples = {}
            received = sum(
                v for (n, _), v in samples.items() if n == "sparkfn_function_received_total"
            )
            return received >= 12

        until(
            all_received,
            lambda: f"received_total 12, still {received}: {samples}",
            SPARK_RUN_TIMEOUT,
            every=0.5,
        )
        assert received == 12
        processed = sum(
            v
            for (n, _), v in samples.items()
            if n == "sparkfn_function_processed_successfully_total"
        )
        assert processed == 12
        assert {i for (n, i) in samples if n == "sparkfn_function_received_total"} == {"0", "1"}

        os.killpg(proc.pid, signal.SIGINT)  # Ctrl+C in a terminal reaches every process
        stdout, stderr = proc.communicate(timeout=STOP_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        stopped = proc.returncode == 0
        for pid in session_processes(proc.pid) if not stopped else ():  # what a failure left
            os.kill(pid, signal.SIGKILL)
    errors = stderr.decode()
    assert proc.returncode == 0, errors
    # Ended STOPPED, and no process of sparkfn's said a traceback or a query failure.
    assert not any(word in errors for word in NOT_SAID), errors
    assert "STOPPED" in errors.splitlines()[-1], errors
    assert "stopped function public/default/watched (SIGINT)" in errors
    nothing_left(proc.pid)
    status = _status(stdout.decode())
    assert _total(status, "numReceived") == 12
    assert [i["status"]["state"] for i in status["instances"]] == ["STOPPED", "STOPPED"]
    assert len(_consume(cli, "out")) == 12
    # The metrics endpoint went away with the process.
    with pytest.raises(OSError):
        _scrape(port)
