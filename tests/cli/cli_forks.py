"""Each ``sparkfn`` command of a test in a process of its own, forked from one that imported it.

A cold ``python -m sparkfn.cli.main`` spends about 1.5 s of CPU importing
(typer, pydantic, SQLAlchemy, pyarrow) before it does anything, and the CLI
tests run hundreds of commands. A :class:`ForkServer` imports the command, and
the modules its commands import as they run, once and forks a child per command: the child gets the test's arguments,
environment, working directory and stdin/stdout/stderr (passed as file
descriptors over a Unix socket), runs ``main()`` and exits with its code. So
each command is still a process of its own with real file descriptors, exit
code and signals, as a user's is, minus the import.

Commands that a test drives while they run (``Cli.popen``) are started cold.
Tests outside ``tests/cli`` (the worker's admin commands) use :func:`run_sparkfn`,
``subprocess.run`` of the command with the same result, forked the same way.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

# The server: imports the command, then forks one child per request.
_SERVER = r"""
import importlib, json, os, signal, socket, struct, sys, traceback
import sparkfn.cli.main as cli

# What nearly every command imports once it runs (the store, topics, the worker's
# client; pyarrow imports pandas on its first array), or pydantic's plugin scan on
# the first model: in each child, about 0.5 s of CPU on the two-core machine.
# Never pyspark: a topics command must not import it (test_topics_cli.py checks,
# in a cold process).
for name in (
    "sparkfn.store.store", "sparkfn.topics.admin", "sparkfn.topics.producer",
    "sparkfn.topics.consumer", "sqlalchemy.dialects.postgresql.psycopg", "httpx",
    "pandas", "typer._adapters",
):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
try:
    from pydantic.plugin._loader import get_plugins
    get_plugins()
except ImportError:
    pass

def child(request, fds):
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.argv = ["sparkfn", *request["argv"]]
    code = 0
    try:
        cli.main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            sys.stderr.write(f"{exc.code}\n")
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)

server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(8)
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    with conn:
        head, fds, _, _ = socket.recv_fds(conn, 4, 3)
        (size,) = struct.unpack("!I", head)
        message = b""
        while len(message) < size:
            message += conn.recv(size - len(message))
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            server.close()
            conn.close()
            child(request, fds)
        for fd in fds:
            os.close(fd)
        conn.sendall(struct.pack("!q", pid))
        _, status = os.waitpid(pid, 0)
        conn.sendall(struct.pack("!q", os.waitstatus_to_exitcode(status)))
"""


class ForkServer:
    """One server process per test process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._path = ""

    def _started(self) -> str:
        if self._proc is not None and self._proc.poll() is None:
            return self._path
        folder = tempfile.mkdtemp(prefix="sparkfn-cli-forks-")
        self._path = str(Path(folder) / "socket")
        env = dict(os.environ, COLUMNS="200")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, self._path],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert self._proc.stdout is not None
        ready = self._proc.stdout.readline()
        assert ready == "ready\n", f"the CLI fork server did not start: {ready!r}"
        atexit.register(self.close)
        return self._path

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        stdin: bytes | None,
        timeout: float,
        cwd: str | os.PathLike[str] | None = None,
    ) -> tuple[int, bytes, bytes]:
        """Run ``sparkfn argv`` in a forked child (in ``cwd``, default this process's):
        its exit code, stdout and stderr.

        Raises :class:`subprocess.TimeoutExpired` (the child killed) after ``timeout``.
        """
        with (
            self._lock,
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn,
        ):
            conn.connect(self._started())
            read_end, write_end = os.pipe()
            feeder: threading.Thread | None = None
            try:
                folder = os.fspath(cwd) if cwd is not None else os.getcwd()
                request = json.dumps({"argv": argv, "env": env, "cwd": folder}).encode()
                fds = [read_end, out.fileno(), err.fileno()]
                socket.send_fds(conn, [struct.pack("!I", len(request))], fds)
                conn.sendall(request)
                os.close(read_end)
                read_end = -1
                feeder = threading.Thread(target=_feed, args=(write_end, stdin or b""), daemon=True)
                feeder.start()
                write_end = -1  # the feeder closes it
                conn.settimeout(timeout)
                (pid,) = struct.unpack("!q", _recv(conn, 8))
                deadline = time.monotonic() + timeout
                try:
                    conn.settimeout(max(0.1, deadline - time.monotonic()))
                    (code,) = struct.unpack("!q", _recv(conn, 8))
                except TimeoutError:
                    os.kill(pid, 9)
                    raise subprocess.TimeoutExpired(["sparkfn", *argv], timeout) from None
            finally:
                for fd in (read_end, write_end):
                    if fd >= 0:
                        os.close(fd)
                if feeder is not None:
                    feeder.join(5)
            out.seek(0)
            err.seek(0)
            return code, out.read(), err.read()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)
        self._proc = None


def run_sparkfn(
    args: Sequence[str],
    env: dict[str, str],
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, sparkfn.cli.main, *args], capture_output=True,
    text=True, ...)``, the command forked from the server instead of started cold."""
    code, out, err = SERVER.run(list(args), env, None, timeout, cwd)
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "sparkfn.cli.main", *args],
        code,
        out.decode("utf-8", errors="replace"),
        err.decode("utf-8", errors="replace"),
    )


def _feed(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(data)
    except BrokenPipeError:  # the command did not read it all
        pass


def _recv(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            msg = "the CLI fork server went away"
            raise RuntimeError(msg)
        data += chunk
    return data


SERVER = ForkServer()
