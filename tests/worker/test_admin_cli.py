"""The admin CLI over REST: ``sparkfn functions ...`` and ``sparkfn packages ...`` against a real worker.

The shared worker process (both stores) serves every check of a test; each
command runs as a user runs it, ``sparkfn`` in a child process of its own
(forked from one that imported the command, ``tests/cli/cli_forks.py``; the
``--watch`` commands, driven while they run, are started cold), so what is
tested includes the one-line errors and exit codes.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_forks import run_sparkfn
from worker_process import SharedWorker

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import WAIT, until

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORDCOUNT = EXAMPLES / "wordcount.py"
SENTENCES = ["the quick fox", "the lazy dog", "a fox and a dog", "the end"]
CREATE = ("functions", "create", "--py", str(WORDCOUNT), "--classname", "wordcount.WordCount")


Ran = subprocess.CompletedProcess[str]


def _described(ran: Ran) -> str:
    return f"{ran.args} exited {ran.returncode}\n--- stdout\n{ran.stdout}--- stderr\n{ran.stderr}"


class Sparkfn:
    """The ``sparkfn`` command pointed at one worker by ``SPARKFN_URL``."""

    def __init__(self, url: str, data_dir: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
        self.env |= {"SPARKFN_URL": url, "SPARKFN_DATA_DIR": str(data_dir), "COLUMNS": "200"}

    def command(self, args: tuple[str, ...]) -> list[str]:
        return [sys.executable, "-m", "sparkfn.cli.main", *args]

    def run(self, *args: str) -> Ran:
        """Run to its end in a process of its own, forked from one that imported the
        command (``tests/cli/cli_forks.py``: what runs is the same, without a cold import)."""
        return run_sparkfn(args, self.env, WAIT)

    def ok(self, *args: str) -> Ran:
        ran = self.run(*args)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, _described(ran)
        return ran

    def json(self, *args: str) -> Any:
        """Run with ``--output-format json`` (every admin command has it); the JSON printed."""
        return json.loads(self.ok(*args, "--output-format", "json").stdout)

    def fail(self, reason: str, *args: str) -> Ran:
        """Run; require exit 1 and one line ``error [reason]: ...`` on stderr, nothing else."""
        ran = self.run(*args)
        assert ran.returncode == 1, _described(ran)
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error [{reason}]: "), _described(ran)
        return ran

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            # Ctrl+C must raise KeyboardInterrupt, as in a terminal.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


class Lines:
    """A child's stdout lines, read in a thread, each awaited with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout
        threading.Thread(
            target=lambda: [self.lines.put(line) for line in stdout], daemon=True
        ).start()

    def next(self, timeout: float = WAIT) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no line within {timeout} s")


def _produce(store: Store, *sentences: str) -> None:
    Producer(store, "sentences").send_batch([Message(s.encode()) for s in sentences])


def _processed(status: dict[str, Any]) -> int:
    return sum(i["status"]["numSuccessfullyProcessed"] for i in status["instances"])


def _wait_processed(url: str, count: int) -> None:
    seen: list[dict[str, Any]] = [{}]

    def enough() -> bool:
        seen[0] = httpx.get(f"{url}/admin/v3/functions/public/default/wordcount/status").json()
        return _processed(seen[0]) >= count

    until(enough, lambda: f"wordcount to process {count}: {seen[0]}", WAIT, every=0.5)


def _wait_status(sparkfn: Sparkfn, field: str, value: Any) -> Any:
    """The status once its ``field`` is ``value``."""
    seen: list[dict[str, Any]] = []

    def reached() -> dict[str, Any] | None:
        seen[:] = [sparkfn.json("functions", "status", "--name", "wordcount")]
        return seen[0] if seen[0][field] == value else None

    return until(reached, lambda: f"{field} {value}: {seen[-1]}", WAIT, every=0.2)


def _wait_state(sparkfn: Sparkfn, state: str) -> Any:
    return _wait_status(sparkfn, "state", state)


def _wait_running(sparkfn: Sparkfn, count: int) -> Any:
    """The status once ``count`` instances run (others stopped alone)."""
    return _wait_status(sparkfn, "numRunning", count)


@pytest.mark.long_running(90)
@pytest.mark.backend("sqlite")
def test_a_function_on_a_worker_is_driven_through_the_cli(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    worker, store = shared_worker, shared_worker.store
    sparkfn = Sparkfn(worker.url, tmp_path / "cli-data")
    admin = TopicAdmin(store)
    admin.create("sentences", partitions=2, schema_type="string")
    admin.create("echo", schema_type="string")
    # A config mistake is found here, before anything is sent.
    sparkfn.fail(
        "invalid_config", "functions", "create", "--py", str(WORDCOUNT), "--parallelism", "0"
    )
    flow = ("--name", "wordcount", "--inputs", "sentences", "--output", "echo")
    created = sparkfn.ok(
        *CREATE,
        *flow,
        "--processing-guarantees",
        "effectively_once",
        "--subscription-position",
        "earliest",
    )
    assert created.stdout == "created function public/default/wordcount (version 1)\n"
    sparkfn.fail("function_already_exists", *CREATE, *flow)
    _produce(store, *SENTENCES)

    assert sparkfn.json("functions", "list") == ["wordcount"]
    # As pulsar-admin prints them: a name a line; indented JSON.
    assert sparkfn.ok("functions", "list").stdout == "wordcount\n"
    assert "public/default/wordcount" in sparkfn.ok("functions", "list", "-o", "table").stdout
    info = sparkfn.json("functions", "get", "--name", "wordcount")
    assert (info["version"], info["inputs"]) == (1, ["persistent://public/default/sentences"])
    # Pulsar's FunctionConfig JSON, as pulsar-admin functions get prints it.
    assert (info["className"], info["runtime"], info["processingGuarantees"]) == (
        "wordcount.WordCount",
        "PYTHON",
        "EFFECTIVELY_ONCE",
    )
    assert (info["subscriptionPosition"], info["output"]) == (
        "Earliest",
        "persistent://public/default/echo",
    )
    assert info["inputSpecs"] == {"persistent://public/default/sentences": {"regexPattern": False}}
    printed = sparkfn.ok("functions", "get", "--fqfn", "public/default/wordcount").stdout
    assert printed.startswith('{\n  "tenant": "public",\n') and json.loads(printed) == info

    _wait_processed(worker.url, len(SENTENCES))
    status = sparkfn.json("functions", "status", "--name", "wordcount")
    assert (status["numRunning"], _processed(status)) == (1, len(SENTENCES))
    assert sum(i["status"]["numReceived"] for i in status["instances"]) == len(SENTENCES)
    assert (
        json.loads(sparkfn.ok("functions", "status", "--name", "wordcount").stdout)["numRunning"]
        == 1
    )
    table = sparkfn.ok("functions", "status", "--name", "wordcount", "-o", "table").stdout
    assert "RUNNING" in table and f"│ {len(SENTENCES)} " in table
    stats = sparkfn.json("functions", "stats", "--name", "wordcount")
    assert stats["processedSuccessfullyTotal"] == len(SENTENCES)
    one = sparkfn.json("functions", "stats", "--name", "wordcount", "--instance-id", "0")
    assert one["receivedTotal"] == len(SENTENCES)

    # State: the counters the function keeps, and a value put by the CLI. querystate prints
    # the FunctionState as pulsar-admin does (indented JSON), or a line with -o table.
    shown = sparkfn.ok("functions", "querystate", "--name", "wordcount", "-k", "the").stdout
    assert shown.startswith("{\n  ") and json.loads(shown)["numberValue"] == 3, shown
    assert (
        sparkfn.ok(
            "functions", "querystate", "--name", "wordcount", "--key", "the", "-o", "table"
        ).stdout
        == "the = counter 3\n"
    )
    fox = sparkfn.json("functions", "querystate", "--name", "wordcount", "--key", "fox")
    assert fox["numberValue"] == 2
    sparkfn.ok("functions", "putstate", "--name", "wordcount", "--key", "greeting", "--value", "hi")
    greeting = sparkfn.json("functions", "querystate", "--name", "wordcount", "--key", "greeting")
    assert greeting["stringValue"] == "hi"
    sparkfn.fail(
        "function_not_found", "functions", "querystate", "--name", "wordcount", "--key", "nope"
    )

    # --watch prints the counter now, then each change, until Ctrl+C.
    watch = sparkfn.popen(
        "functions", "querystate", "--name", "wordcount", "--key", "fox", "--watch", "-o", "table"
    )
    try:
        lines = Lines(watch)
        assert lines.next().endswith("fox = counter 2\n")
        _produce(store, "fox fox fox")
        assert lines.next().endswith("fox = counter 5\n")
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == 0

    # A triggered value comes back as the function's output.
    assert (
        sparkfn.ok("functions", "trigger", "--name", "wordcount", "--trigger-value", "a b c").stdout
        == "a b c\n"
    )

    # Stop waits until the function has stopped, as pulsar-admin's does, and says how.
    assert (
        sparkfn.ok("functions", "stop", "--name", "wordcount").stdout
        == "stopped function public/default/wordcount (SUSPENDED)\n"
    )
    stopped = sparkfn.json("functions", "status", "--name", "wordcount")
    assert (stopped["state"], stopped["numRunning"]) == ("SUSPENDED", 0)
    sparkfn.ok("functions", "start", "--name", "wordcount")
    _wait_state(sparkfn, "RUNNING")
    # --no-wait returns once the worker took the stop; status shows the run ending.
    assert (
        sparkfn.ok("functions", "stop", "--name", "wordcount", "--no-wait").stdout
        == "asked function public/default/wordcount to stop; not waiting (--no-wait)\n"
    )
    assert _wait_state(sparkfn, "SUSPENDED")["numRunning"] == 0
    sparkfn.ok("functions", "start", "--name", "wordcount")
    _produce(store, "the restart")
    # The counts go on across the stop: the sentences, fox fox fox, the trigger, this one.
    _wait_processed(worker.url, len(SENTENCES) + 3)
    live = sparkfn.popen("functions", "status", "--name", "wordcount", "--watch", "-o", "json")
    try:
        assert json.loads(Lines(live).next())["numRunning"] == 1
    finally:
        live.send_signal(signal.SIGINT)
        assert live.wait(30) == 0

    # update changes what it is given and keeps the rest; get shows every version.
    updated = sparkfn.json(
        "functions",
        "update",
        "--name",
        "wordcount",
        "--parallelism",
        "2",
        "--stop-mode",
        "suspend",
    )
    assert (updated["version"], updated["parallelism"]) == (2, 2)
    assert updated["output"] == "persistent://public/default/echo"
    assert updated["packageDigest"] == info["packageDigest"]
    assert (
        sparkfn.json("functions", "get", "--name", "wordcount", "--version", "1")["parallelism"]
        == 1
    )
    assert sparkfn.json("functions", "status", "--name", "wordcount")["numInstances"] == 2

    # One instance: suspended alone, the other counts on; start brings it back; drained alone.
    _wait_running(sparkfn, 2)
    one = ("--name", "wordcount", "--instance-id", "1")
    assert (
        sparkfn.ok("functions", "suspend", *one).stdout
        == "suspended instance 1 of function public/default/wordcount\n"
    )
    assert (
        sparkfn.ok("functions", "stop", *one).stdout  # waits: stopped by the suspend
        == "stopped instance 1 of function public/default/wordcount (STOPPED)\n"
    )
    assert _wait_running(sparkfn, 1)["instances"][0]["status"]["state"] == "RUNNING"
    _produce(store, "zebra zebra")

    def answered() -> Ran | None:
        ran = sparkfn.run(
            "functions", "querystate", "--name", "wordcount", "--key", "zebra", "-o", "table"
        )
        return ran if ran.returncode == 0 else None

    ran = until(answered, "the restarted instance to answer querystate for zebra", WAIT, every=0.5)
    assert ran.stdout == "zebra = counter 2\n", _described(ran)
    sparkfn.ok("functions", "start", *one)
    _wait_running(sparkfn, 2)
    sparkfn.ok("functions", "drain", *one)
    _wait_running(sparkfn, 1)
    sparkfn.fail(
        "function_not_found", "functions", "suspend", "--name", "wordcount", "--instance-id", "9"
    )
    sparkfn.ok("functions", "start", *one)
    _wait_running(sparkfn, 2)

    # Packages: upload, list, download the same bytes.
    sparkfn.ok("packages", "upload", "--source-file", str(WORDCOUNT), "--path", "acme/wc.py")
    listed = sparkfn.json("packages", "list")
    assert any("acme/wc.py" in p["paths"] for p in listed)
    copy = tmp_path / "copy.py"
    sparkfn.ok("packages", "download", "--path", "acme/wc.py", "--destination-file", str(copy))
    assert copy.read_bytes() == WORDCOUNT.read_bytes()
    sparkfn.fail("package_not_found", "packages", "download", "--path", "nope.py")

    # Delete, and the errors: an unknown function, a worker that is not there.
    deleted = sparkfn.json("functions", "delete", "--name", "wordcount")
    assert deleted["fqfn"] == "public/default/wordcount"
    sparkfn.fail("function_not_found", "functions", "get", "--name", "wordcount")
    sparkfn.fail("function_not_found", "functions", "status", "--fqfn", "public/default/wordcount")
    assert sparkfn.json("functions", "list") == []
    gone = sparkfn.fail("worker_unreachable", "functions", "list", "--url", "http://127.0.0.1:9")
    assert "http://127.0.0.1:9" in gone.stderr
