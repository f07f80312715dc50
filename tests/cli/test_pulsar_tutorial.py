"""Pulsar's functions tutorial, its commands as written, on a fresh data directory (issue 29).

``pulsar-admin functions localrun`` of the classic exclamation function
(``from pulsar import Function``) on ``persistent://`` topics nobody
created, ``pulsar-client consume ... --subscription-name my-subscription
--num-messages 0`` listening, then ``pulsar-client produce ... --num-produce
1 --messages "Hello world"``: with ``sparkfn functions`` and ``sparkfn
topics`` in their place, ``Hello world!`` arrives. Then the same with the
real ``pulsar-client`` package importable beside sparkfn. A second test
shows a localrun's function logs on its console.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from cli_runner import Cli

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from waiting import until

REPO = Path(__file__).resolve().parents[2]
EXCLAMATION = """\
from pulsar import Function


class ExclamationFunction(Function):
    def __init__(self):
        pass

    def process(self, input, context):
        return input + '!'
"""
LOGGING = """\
from pulsar import Function


class Shout(Function):
    def process(self, input, context):
        context.get_logger().info("shouting %s", input)
        return input.upper()
"""
TIMEOUT = 240.0

pytestmark = [pytest.mark.slow, pytest.mark.long_running(60)]


class _Lines:
    """A child's output, read on a thread: what it printed so far."""

    def __init__(self, stream: object) -> None:
        self.text = ""
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for chunk in iter(lambda: stream.readline(), b""):  # type: ignore[attr-defined]
            self.text += chunk.decode(errors="replace")

    def wait_for(self, text: str, child: subprocess.Popen[bytes], what: str) -> None:

        def said() -> bool:
            assert child.poll() is None, f"{what} exited {child.returncode}:\n{self.text}"
            return text in self.text

        until(said, lambda: f"{text!r} from {what}:\n{self.text}", TIMEOUT, every=0.2)


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@pytest.mark.parametrize("pulsar_installed", [False, True], ids=["sparkfn-only", "pulsar-client"])
def test_pulsars_tutorial_commands_work_as_written(
    cli: Cli, tmp_path: Path, request: pytest.FixtureRequest, pulsar_installed: bool
) -> None:
    (tmp_path / "exclamation.py").write_text(EXCLAMATION)
    if pulsar_installed:
        client_dir = request.getfixturevalue("pulsar_client")
        cli.env["PYTHONPATH"] = str(client_dir)
    children: list[subprocess.Popen[bytes]] = []
    try:
        localrun = cli.popen(
            "functions", "localrun",
            "--py", str(tmp_path / "exclamation.py"),
            "--classname", "exclamation.ExclamationFunction",
            "--inputs", "persistent://public/default/exclamation-input",
            "--output", "persistent://public/default/exclamation-output",
            "--tenant", "public",
            "--namespace", "default",
            "--name", "exclamation",
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
        )  # fmt: skip
        children.append(localrun)
        ran = _Lines(localrun.stderr)
        consume = cli.popen(
            "topics", "consume", "persistent://public/default/exclamation-output",
            "--subscription-name", "my-subscription",
            "--num-messages", "0",
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        children.append(consume)
        consumed = _Lines(consume.stdout)
        ran.wait_for("starting function public/default/exclamation", localrun, "localrun")
        # Produced once the function runs: its subscription starts at the latest message.

        def subscribed() -> bool:
            assert localrun.poll() is None, ran.text
            return _subscribed(cli)

        until(subscribed, lambda: f"the function's subscription:\n{ran.text}", TIMEOUT, every=0.5)
        cli.ok(
            "topics", "produce", "persistent://public/default/exclamation-input",
            "--num-produce", "1",
            "--messages", "Hello world",
        )  # fmt: skip
        consumed.wait_for("Hello world!", consume, "consume")
        assert "error" not in ran.text.lower(), ran.text
    finally:
        for child in children:
            _stop(child)


def _subscribed(cli: Cli) -> bool:
    """Whether the function's subscription on its input exists (it started reading)."""
    store = Store.open(data_dir=cli.env["SPARKFN_DATA_DIR"])
    try:
        admin = TopicAdmin(store)
        if not admin.exists("exclamation-input"):
            return False
        return "public/default/exclamation" in admin.subscriptions("exclamation-input")
    finally:
        store.close()


def test_a_localruns_function_logs_show_on_its_console(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "shout.py").write_text(LOGGING)
    cli.ok("topics", "produce", "words", "-m", "hello", "-m", "spark")
    done = subprocess.run(
        cli.command([
            "functions", "localrun", "--py", str(tmp_path / "shout.py"),
            "--classname", "shout.Shout", "--inputs", "words", "--output", "loud",
            "--subscription-position", "earliest", "--until-drained", "--spark-master", "local[1]",
        ]),
        capture_output=True, text=True, env=cli.env, stdin=subprocess.DEVNULL,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    logged = [line for line in done.stderr.splitlines() if "[public/default/Shout:0]" in line]
    assert [line.split("] ", 1)[1] for line in logged] == ["shouting hello", "shouting spark"]
    assert all(" INFO " in line for line in logged), logged
    files = list((Path(cli.env["SPARKFN_DATA_DIR"]) / "logs" / "functions").rglob("*.log"))
    assert [f.relative_to(Path(cli.env["SPARKFN_DATA_DIR"])) for f in files] == [
        Path("logs/functions/public/default/Shout/instance-0.log")
    ]
    assert os.path.getsize(files[0]) > 0
