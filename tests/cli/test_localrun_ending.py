"""How ``functions localrun`` ends when its JVM dies or a stop signal comes.

Each test runs the real command in a session of its own (so its whole tree,
the JVM, the zygote, Spark's Python daemon and workers, is found by session
id and a signal can go to its process group as a terminal's Ctrl+C does),
waits until the function has processed a message, then:

* SIGKILLs its JVM (as the kernel's OOM killer would): the command ends
  within 30 s, non-zero, with one error line naming the cause, and nothing of
  its tree is left running;
* sends SIGTERM to the command (a service manager's stop): the run ends
  ``STOPPED``, exit 0, and no process of sparkfn's prints a traceback or a
  query failure. The same for SIGINT to its process group (Ctrl+C in a
  terminal) is checked on the long run of ``test_functions_cli.py``, which
  starts a JVM only to stop it, with this module's helpers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import Cli, cli_env

from sessions import session_processes
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import until

EXCLAMATION = str(Path(__file__).resolve().parents[2] / "examples" / "exclamation.py")
START_SECONDS = 180.0  # a cold JVM on a loaded two-core machine
# What a normal stop must not print: a traceback, an interrupt, a query failure, Py4J's names.
NOT_SAID = ("Traceback", "KeyboardInterrupt", "QueryFailed", "STREAM_FAILED", "py4j")

# slow: a Spark test, so on one backend each but the JVM kill (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.long_running(60)]


@pytest.fixture
def localrun(store: Store) -> Iterator[subprocess.Popen[bytes]]:
    """``functions localrun`` of exclamation.py over ``in``, once it has processed a message."""
    admin = TopicAdmin(store)
    admin.create("in", schema_type="string")
    admin.create("out", schema_type="string")
    cli = Cli(cli_env(store.data_dir, store.url))
    args = ["--py", EXCLAMATION, "--name", "bang", "--inputs", "in", "--output", "out"]
    args += ["--subscription-position", "earliest"]
    proc = cli.popen(
        "functions", "localrun", *args,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        Producer(store, "in").send_batch([Message(b"a")])
        consumer = Consumer(store, "out", initial_position="earliest")

        def processed() -> bool:
            assert proc.poll() is None, proc.communicate()[1].decode()
            return bool(consumer.receive(max_messages=1, timeout=0.2))

        until(processed, "the function to process its message", START_SECONDS, every=0)
        yield proc
    finally:
        for pid in session_processes(proc.pid):  # whatever a failed test left
            _kill(pid)
        proc.wait()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _jvm(sid: int) -> int:
    for pid in session_processes(sid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if command.endswith(b"java"):
            return pid
    pytest.fail(f"no JVM in session {sid}")


def _ended(proc: subprocess.Popen[bytes], within: float) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        pytest.fail(f"localrun did not end within {within} s")
    return proc.returncode, err.decode(errors="replace")


def nothing_left(sid: int) -> None:
    """No process of the command's session outlives it (a moment for the last to go)."""

    def left() -> dict[int, bytes]:
        found = {}
        for pid in session_processes(sid):
            with contextlib.suppress(OSError):
                found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
        return found

    until(lambda: not session_processes(sid), lambda: f"the session to end: {left()}", 10)


@pytest.mark.both_backends  # issue 39's acceptance: both stores
def test_localrun_whose_jvm_is_killed_ends_with_one_line_and_nothing_left(
    localrun: subprocess.Popen[bytes],
) -> None:
    os.kill(_jvm(localrun.pid), signal.SIGKILL)
    code, stderr = _ended(localrun, 30)
    assert code != 0, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1, stderr
    assert "function public/default/bang failed" in errors[0], stderr
    assert "killed by SIGKILL" in errors[0], stderr
    assert not any(word in stderr for word in NOT_SAID), stderr
    nothing_left(localrun.pid)


def test_sigterm_ends_localrun_stopped_without_a_traceback(
    localrun: subprocess.Popen[bytes],
) -> None:
    """A service manager's stop. (Ctrl+C, SIGINT to the process group: the long run of
    ``test_functions_cli.py``, which starts a JVM to be stopped anyway.)"""
    localrun.send_signal(signal.SIGTERM)
    code, stderr = _ended(localrun, 60)
    assert code == 0, stderr
    assert "STOPPED" in stderr.splitlines()[-1], stderr
    assert not any(word in stderr for word in NOT_SAID), stderr
    nothing_left(localrun.pid)
