"""Spark's Python executable when a zygote serves (:mod:`sparkfn.runtime.spark.zygote`).

Spark starts its Python processes as ``<python> -m <module> ...``. This
module is that ``<python>`` (installed as the ``sparkfn-spark-python``
script beside the interpreter, see
:func:`sparkfn.runtime.spark.session.use_project_interpreter`): a source runner
(:data:`~sparkfn.runtime.spark.zygote.FORKED`) is handed to the zygote named by
``SPARKFN_ZYGOTE``, which forks it with its imports done (so does a
Python daemon); this process
stays, so Spark still sees a process of its own, forwards ``SIGTERM``,
``SIGINT`` and ``SIGHUP`` to the runner, and exits with its status. Every
other process, and any runner the zygote does not take (not running,
refusing), is this interpreter exec'd with the same arguments, as if
nothing stood between.

Spark runs this for every Python process it starts, so it imports nothing
but what the interpreter has already loaded and C modules (``_socket``,
``_signal``): ``socket``, ``signal`` and ``json`` took 20 ms of its 40 ms,
the package's ``typing`` 10-25 ms more. The request is one line, a Python
literal (``repr``), which the zygote reads with ``ast.literal_eval``.
"""

from __future__ import annotations

import _signal
import _socket
import os
import sys

ZYGOTE_ENV = "SPARKFN_ZYGOTE"  # the zygote's socket (see socket_address)
SCRIPT = "sparkfn-spark-python"  # this module's console script


def socket_address(name: str) -> str:
    """The address of a zygote's socket named ``name``: ``@x`` is ``x`` in Linux's
    abstract namespace (no file to clean up), anything else a path."""
    return "\0" + name[1:] if name.startswith("@") else name


# Kept in step with zygote.FORKED; not imported, so that this module stays cheap to start.
FORKED = frozenset(
    {
        "pyspark.sql.streaming.python_streaming_source_runner",
        "pyspark.daemon",
        "sparkfn.runtime.spark.daemon",
    }
)


def main(args: list[str]) -> int:
    """Run ``args`` (what follows the interpreter on Spark's command line); only returns
    the status of a runner the zygote ran."""
    path = os.environ.get(ZYGOTE_ENV)
    if path and len(args) >= 2 and args[0] == "-m" and args[1] in FORKED:
        code = _forked(path, args)
        if code is not None:
            return code
    os.execv(sys.executable, [sys.executable, *args])


def _forked(path: str, args: list[str]) -> int | None:
    """The runner's exit status, or None if the zygote did not take it (run it here instead)."""
    request = {
        "executable": sys.executable,
        "argv": args,
        "env": dict(os.environ),
        "cwd": os.getcwd(),
    }
    line = repr(request).encode("utf-8", "surrogateescape") + b"\n"  # repr holds no raw newline
    fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))  # struct int[3]
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    replies = _Lines(sock)
    # Handlers from the start: a signal that comes before the zygote named the child (the
    # child may already run, and print) is held, and passed on once the pid is known.
    child: list[int] = []
    held: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if not child:
            held.append(signum)
            return
        try:
            os.kill(child[0], signum)
        except ProcessLookupError:
            pass

    previous = {
        sig: _signal.signal(sig, forward)
        for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
    }
    try:
        sock.connect(socket_address(path))
        sent = sock.sendmsg([line], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        sock.sendall(line[sent:])
        first = replies.readline()
    except OSError:
        sock.close()
        _restore(previous, held)
        return None
    if not first.strip():
        _restore(previous, held)
        return None  # refused before forking: nothing runs
    child.append(int(first))
    for signum in held:
        forward(signum, None)
    try:
        status = replies.readline()
    except OSError:
        status = b""
    if not status.strip():  # the zygote ended before its child: leave no runner behind
        forward(_signal.SIGKILL, None)
        return 1
    code = int(status)
    return 128 - code if code < 0 else code


def _restore(previous: dict[int, object], held: list[int]) -> None:
    """Nothing was forked: the handlers as they were, and a held signal acts on this
    process (the runner then runs here, as without a zygote)."""
    for sig, handler in previous.items():
        _signal.signal(sig, handler)
    for signum in held:
        os.kill(os.getpid(), signum)


class _Lines:
    """Lines read from a socket (``socket.makefile`` without the ``socket`` module)."""

    def __init__(self, sock: _socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def readline(self) -> bytes:
        """The next line with its newline; what is left (no newline) at the end; b"" after it."""
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(4096)
            if not chunk:
                line, self._buffer = self._buffer, b""
                return line
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line + b"\n"


def run() -> None:
    """The console script's entry point."""
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    run()
