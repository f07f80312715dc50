"""The zygote forks Spark's source runners with their imports done; the launcher stands in for them.

Real processes throughout: a zygote serving a probe module, launchers run
as Spark would run Python, and a Spark query whose source runner the
session's zygote forked.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkfn.runtime.spark import launch, zygote
from waiting import until

HERE = Path(__file__).parent
PROBE = "zygote_probe"
RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A zygote forking the probe module, on a socket in ``tmp_path``."""
    path = tmp_path / "z.sock"
    proc = _zygote(path, PROBE)
    _wait_listening(path, proc)
    yield path, proc
    _end(proc)
    assert not path.exists()


def _zygote(path: Path, module: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    """A zygote forking ``module`` on the socket ``path`` (the probe importable)."""
    env = {**os.environ, **zygote.THREADLESS_ENV, "PYTHONPATH": str(HERE), **kwargs.pop("env", {})}
    command = [sys.executable, "-m", zygote.__name__, str(path), "-" * zygote.ARGV_ROOM, module]
    return subprocess.Popen(command, stdin=subprocess.PIPE, env=env, **kwargs)


def _wait_listening(path: Path, proc: subprocess.Popen[bytes]) -> None:
    def listening() -> bool:
        assert proc.poll() is None, "the zygote ended"
        return path.exists()

    until(listening, f"the zygote to listen on {path}", 60, every=0.05)


def _end(proc: subprocess.Popen[bytes]) -> None:
    """End the zygote as the driver's end does: its stdin closes."""
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def _launch(path: Path, *args: str, module: str = PROBE, **kwargs: Any) -> subprocess.Popen[str]:
    """A launcher handing ``-m module args`` to the zygote (as ``launch.main`` does for a runner)."""
    code = (
        "import sys; from sparkfn.runtime.spark import launch; "
        f"sys.exit(launch._forked({str(path)!r}, ['-m', {module!r}, *sys.argv[1:]]))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_a_forked_child_takes_over_the_launchers_streams_environment_and_command_line(
    served: tuple[Path, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    path, proc = served
    # A large environment: the request arrives in more than one read.
    padding = {f"PADDING_{i}": "x" * 100_000 for i in range(3)}
    env = {**os.environ, **padding, "ZYGOTE_PROBE": "from the launcher"}
    launcher = _launch(path, "a", "b c", env=env, cwd=tmp_path)
    out, _ = launcher.communicate("a line on stdin\n", timeout=60)
    assert launcher.returncode == 7, out  # the child's exit status
    report = json.loads(out)
    assert report["argv"][1:] == ["a", "b c"]
    assert report["argv"][0].endswith(f"{PROBE}.py")
    assert report["env"] == "from the launcher"
    assert Path(report["cwd"]) == tmp_path
    assert report["stdin"] == "a line on stdin"
    assert report["ppid"] == proc.pid  # forked by the zygote, not started anew
    # ps and /proc show what runs, as if Spark had started it itself.
    assert report["cmdline"] == [sys.executable, "-m", PROBE, "a", "b c"]


def test_an_environment_value_with_a_newline_or_undecodable_bytes_arrives_intact(
    served: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, _ = served
    value = 'two\nlines, "quoted", and a byte that is not UTF-8: \udcff'
    launcher = _launch(path, env={**os.environ, "ZYGOTE_PROBE": value})
    out, _ = launcher.communicate("\n", timeout=60)
    assert launcher.returncode == 7, out
    assert json.loads(out)["env"] == value


def test_a_request_that_is_not_a_literal_is_refused_and_the_zygote_serves_on(
    served: tuple[Path, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    path, proc = served
    marker = tmp_path / "ran"
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    request = {"executable": sys.executable, "argv": ["-m", PROBE], "env": {}, "cwd": code}
    line = repr(request).replace(repr(code), code).encode() + b"\n"  # a call, not a literal
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        socket.send_fds(sock, [line], [0, 1, 2])
        assert sock.recv(100) == b""  # closed without a pid: nothing forked
    assert not marker.exists()
    launcher = _launch(path)  # the next launcher is served
    out, _ = launcher.communicate("\n", timeout=60)
    assert (launcher.returncode, json.loads(out)["ppid"]) == (7, proc.pid)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_the_child_ends_with_its_launcher(
    served: tuple[Path, subprocess.Popen[bytes]], how: signal.Signals
) -> None:
    path, _ = served
    launcher = _launch(path, "sleep")
    assert launcher.stdout is not None
    child = json.loads(launcher.stdout.readline())["pid"]
    launcher.send_signal(how)  # SIGTERM is forwarded; a SIGKILL is seen as the launcher's end
    code = launcher.wait(timeout=30)
    assert code == (128 + signal.SIGTERM if how == signal.SIGTERM else -signal.SIGKILL)
    until(
        lambda: not Path(f"/proc/{child}").exists() or _state(child) == "Z",
        f"child {child} to end with its launcher",
        10,
        every=0.05,
    )


def test_a_child_lives_as_long_as_its_launcher(
    served: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """Longer than the zygote waits for a request (5 s): a runner lives as long as its query."""
    path, _ = served
    launcher = _launch(path, "sleep")
    assert launcher.stdout is not None
    child = json.loads(launcher.stdout.readline())["pid"]
    time.sleep(7)
    assert _state(child) not in ("Z", "gone") and launcher.poll() is None
    launcher.terminate()
    assert launcher.wait(timeout=30) == 128 + signal.SIGTERM


def test_a_launcher_that_comes_before_the_zygote_is_ready_is_still_forked(tmp_path: Path) -> None:
    """The driver listens before the zygote has started, as ``start_zygote`` does: a runner
    Spark starts at once waits for the zygote's imports instead of running unforked."""
    path = tmp_path / "early.sock"
    with zygote.listen(str(path)) as listener:
        fd = listener.fileno()
        proc = _zygote(path, PROBE, env={zygote.LISTENER_ENV: str(fd)}, pass_fds=[fd])
        launcher = _launch(path, "early")  # the zygote's interpreter is still starting
    try:
        out, _ = launcher.communicate("", timeout=60)
        assert launcher.returncode == 7, out
        assert json.loads(out)["ppid"] == proc.pid
    finally:
        _end(proc)


def test_a_preloaded_package_module_runs_without_runpys_warning(tmp_path: Path) -> None:
    """Every module the zygote forks is imported beforehand (``pyspark.daemon`` is), and
    runpy warns on stderr when it runs such a module of a package again: not here. (json.tool
    closes its stdout when done; what it or runpy wrote to stderr still arrives.)"""
    path = tmp_path / "pkg.sock"
    proc = _zygote(path, "json.tool")
    try:
        _wait_listening(path, proc)  # (the imports may still run: the launch waits)
        launcher = _launch(path, module="json.tool", stderr=subprocess.PIPE)
        out, err = launcher.communicate('{"a": 1}', timeout=60)
        assert (launcher.returncode, json.loads(out)) == (0, {"a": 1}), err
        assert err == ""
    finally:
        _end(proc)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_without_a_zygote_the_launcher_is_the_interpreter(tmp_path: Path) -> None:
    env = {**os.environ, launch.ZYGOTE_ENV: str(tmp_path / "none.sock")}
    for args in (
        ["-c", "import sys; print(sys.argv[1:]); sys.exit(3)", "x"],  # not a runner
        ["-m", RUNNER, "--help"],  # a runner, but no zygote listens
    ):
        done = subprocess.run(
            [sys.executable, "-m", launch.__name__, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if args[0] == "-c":
            assert (done.returncode, done.stdout.strip()) == (3, "['x']")
        else:  # the real runner, exec'd: with no JVM to connect to it fails on its own
            assert done.returncode != 0 and "sparkfn" not in done.stderr.split("\n")[-2:]


def test_the_sessions_source_runners_are_forked_by_its_zygote(spark: Any, data_dir: Path) -> None:
    with source_runners(spark, data_dir, "zygote_probe_query") as runners:
        parents = {tuple(_argv(_ppid(pid))[1:3]) for pid in runners}
    assert parents == {("-m", zygote.__name__)}, parents


@contextlib.contextmanager
def source_runners(spark: Any, data_dir: Path, name: str) -> Iterator[list[int]]:
    """The source runners of a running query of the ``sparkfn`` source (stopped after)."""
    from sparkfn.store.store import Store
    from sparkfn.topics.admin import TopicAdmin

    store = Store.open(None, data_dir)
    try:
        TopicAdmin(store).create("in")
        # Another test's query of this session (a group's, ending) is not this one's.
        before = set(_runners())
        query = (
            spark.readStream.format("sparkfn")
            .option("storeUrl", store.url)
            .option("dataDir", str(store.data_dir))
            .option("topic", "in")
            .load()
            .writeStream.format("memory")
            .queryName(name)
            .start()
        )
        try:
            yield _wait_for_runners(query, before)
        finally:
            query.stop()
    finally:
        store.close()


def _runners() -> list[int]:
    return [pid for pid in _descendants(os.getpid()) if _argv(pid)[1:3] == ["-m", RUNNER]]


def _wait_for_runners(query: Any, before: set[int] | None = None) -> list[int]:
    def runners() -> list[int]:
        found = [pid for pid in _runners() if pid not in (before or set())]
        return found if query.lastProgress is not None else []

    return until(runners, "a new source runner of the query and its first progress", 60)


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0")
    except OSError:
        return []
    return [part.decode() for part in raw.split(b"\0")]


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = _ppid(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found.extend(children)
        frontier.extend(children)
    return found


def test_launcher_and_zygote_fork_the_same_modules() -> None:
    assert launch.FORKED == zygote.FORKED
