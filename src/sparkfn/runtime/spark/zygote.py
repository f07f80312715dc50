"""A process that forks Spark's Python source runners and daemons with their imports done.

Every streaming query of the ``sparkfn`` source makes Spark start a Python
process on the driver, ``python -m pyspark.sql.streaming.python_streaming_source_runner``,
and the first offset of the query waits for it: about 0.4 s of imports
(pyspark's runner 0.2 s, then sparkfn's reader with SQLAlchemy 0.2 s) of the
0.65 s a function's query took to its first batch, against 0.15 s for a
native Spark job. A function's start, a restart after a failure and a
parked function's wake-up all pay it.

For a local master, :func:`sparkfn.runtime.spark.session.spark_session` starts this
module beside the driver. It imports what a source runner imports, once,
then serves requests on a Unix socket: Spark's Python executable is
:mod:`sparkfn.runtime.spark.launch`, which hands a runner's command line,
environment, working directory and standard streams to this process; a
forked child takes them over and runs the runner module, and the launcher
waits for it, forwards signals to it, and exits with its status. Anything
else, and any launch the zygote cannot serve, runs as before.

Forking is only safe from a process with one thread: ``fork()`` copies the
calling thread alone, and a lock another thread held would stay locked in
the child. numpy's OpenBLAS and pyarrow's jemalloc start a thread on
import; with ``OPENBLAS_NUM_THREADS=1`` and jemalloc's background thread
off (both set for this process only) they start none, and the zygote
checks it has one thread before it serves. It ends when the driver does
(its standard input closes). Its socket is in Linux's abstract namespace,
so there is no file to clean up, and it serves only processes of its own
user (``SO_PEERCRED``).

The forked runner shows the runner's command line in ``ps`` and
``/proc/<pid>/cmdline`` (the zygote's argument space, reserved on its own
command line, is overwritten), so tools that look for runners find it.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import gc
import importlib
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import threading
import traceback
import warnings

from sparkfn.runtime.spark import daemon
from sparkfn.runtime.spark.launch import socket_address

# Modules Spark starts as processes of their own that are forked here: the
# per-query source runner, and the daemons whose forks run the planning
# calls (pyspark's) and the tasks (sparkfn's). A daemon forked from here
# passes what it holds on to every worker it forks, so a worker Spark
# forks again after a minute without tasks starts with its imports done.
FORKED = frozenset(
    {
        "pyspark.sql.streaming.python_streaming_source_runner",
        "pyspark.daemon",
        "sparkfn.runtime.spark.daemon",
    }
)

# What those processes import: pyspark's runner and workers, pandas and
# pyarrow (thread-free here, see THREADLESS_ENV), SQLAlchemy, and sparkfn's
# source, reader and task runtime.
PRELOAD = (
    "pyspark.sql.streaming.python_streaming_source_runner",
    "pyspark.daemon",
    "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.plan_data_source_read",
    "pandas",
    *daemon.PRELOAD,  # what sparkfn's daemon loads for its tasks
    "sparkfn.topics.spark.source",
    "sparkfn.topics.spark.reader",
    "sparkfn.runtime.group.reader",
    "sparkfn.runtime.query.staging",
)

# Set for the zygote's own imports, so that they start no thread.
THREADLESS_ENV = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}

ARGV_ROOM = 256  # bytes of command line reserved for a child's own
MAX_REQUEST = 1 << 20


def threads() -> int:
    """This process's OS threads."""
    return len(os.listdir("/proc/self/task"))


def preload(extra: frozenset[str] = frozenset()) -> None:
    """Import :data:`PRELOAD` and ``extra``; a module that fails is left to the runner."""
    for name in (*PRELOAD, *sorted(extra - set(PRELOAD))):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - the runner imports it and reports it
            sys.stderr.write(f"sparkfn zygote: not preloading {name}: {exc}\n")


LISTENER_ENV = "SPARKFN_ZYGOTE_LISTENER"  # the fd of a listening socket made by the driver


def listen(path: str) -> socket.socket:
    """A socket listening at ``path`` (see :func:`~sparkfn.runtime.spark.launch.socket_address`)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if not path.startswith("@"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    listener.bind(socket_address(path))
    if not path.startswith("@"):
        os.chmod(path, 0o600)
    listener.listen(64)
    return listener


def serve(path: str, forked: frozenset[str] = FORKED) -> int:
    """Preload, then fork the ``forked`` modules for requests on the Unix socket ``path``
    until stdin closes.

    The socket listens before the imports (or was made listening by the
    driver, fd in :data:`LISTENER_ENV`): a launcher that comes while they
    run waits in the backlog instead of being refused and running unforked.
    """
    # A terminal's Ctrl+C reaches the driver's whole process group, this process too:
    # it ends with its driver (stdin), never with a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inherited = os.environ.pop(LISTENER_ENV, None)
    listener = socket.socket(fileno=int(inherited)) if inherited else listen(path)
    preload(forked)
    gc.collect()
    gc.freeze()
    if threads() != 1:
        sys.stderr.write("sparkfn zygote: imports started a thread; not forking runners\n")
        listener.close()  # the waiting launchers read an end and run their module themselves
        return 1
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    selector.register(sys.stdin, selectors.EVENT_READ, "driver")
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "driver" and not os.read(sys.stdin.fileno(), 4096):
                    return 0  # the driver ended
                if key.data == "accept":
                    conn, _ = listener.accept()
                    held = [listener, wake_r, wake_w, *children.values()]
                    pid = _spawn(conn, held, selector, forked)
                    if pid is not None:
                        children[pid] = conn
                if key.data == "child":
                    with contextlib.suppress(BlockingIOError):
                        wake_r.recv(4096)
                    _reap(children)
    finally:
        if not path.startswith("@"):
            with contextlib.suppress(OSError):
                os.unlink(path)


def _spawn(
    conn: socket.socket,
    held: list[socket.socket],
    selector: selectors.BaseSelector,
    forked: frozenset[str],
) -> int | None:
    """Read one launch request and fork its child; the child's pid goes back to the launcher.

    The child closes what the zygote holds (``held``, the selector): other
    children's connections among them.
    """
    try:
        conn.settimeout(5)
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid != os.getuid():
            msg = f"a process of user {uid} is not served"
            raise ValueError(msg)
        data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
        while data and not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            data += conn.recv(MAX_REQUEST)  # a request is one line; a large one comes in parts
        request = ast.literal_eval(
            data.decode()
        )  # a literal only (see sparkfn.runtime.spark.launch)
        if not isinstance(request, dict):
            msg = "not a request"
            raise ValueError(msg)
        if len(fds) != 3 or request["argv"][0] != "-m" or request["argv"][1] not in forked:
            msg = "not a runner request"
            raise ValueError(msg)
    except Exception as exc:  # noqa: BLE001 - whatever was sent is refused; the zygote serves on
        sys.stderr.write(f"sparkfn zygote: bad request: {exc}\n")
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        selector.close()
        for sock in held:
            sock.close()
        _become(conn, fds, request)  # never returns
    for fd in fds:
        os.close(fd)
    conn.settimeout(None)
    try:
        conn.sendall(f"{pid}\n".encode())
    except OSError:  # the launcher is gone: so is its runner
        os.kill(pid, signal.SIGKILL)
    return pid


def _reap(children: dict[int, socket.socket]) -> None:
    """Tell the launcher of every ended child how it ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):
            conn.sendall(f"{code}\n".encode())
        conn.close()


def _become(conn: socket.socket, fds: list[int], request: dict[str, object]) -> None:
    """In the child: take over the launcher's streams, environment and command line; run the module."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        # As a process the JVM starts: pyspark starts the JVM with SIGINT ignored, so
        # a Ctrl+C meant for the driver does not kill a query's source runner.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        env = request["env"]
        cwd = request["cwd"]
        argv = request["argv"]
        assert isinstance(env, dict) and isinstance(cwd, str) and isinstance(argv, list)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        # The path Spark gave the runner; the zygote's own is already in place.
        for entry in reversed(env.get("PYTHONPATH", "").split(os.pathsep)):
            if entry and entry not in sys.path:
                sys.path.insert(1, entry)
        _set_cmdline([str(request["executable"]), *argv])
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        _watch_launcher(conn)
        sys.argv = [argv[1], *argv[2:]]
        # The module was preloaded on purpose; runpy would warn on stderr that it runs it again.
        warnings.filterwarnings(
            "ignore", message=r".* found in sys\.modules after import of package", module="runpy"
        )
        if argv[1] == "pyspark.daemon":  # the planning calls' daemon, with quiet workers
            daemon.serve()
        else:
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported like an uncaught error, then the exit
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):  # each: a module may have closed one
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _watch_launcher(conn: socket.socket) -> None:
    """End this child when its launcher ends (it cannot forward a SIGKILL)."""
    conn.settimeout(None)  # the request's timeout would end the watch, and the child, early

    def watch() -> None:
        with contextlib.suppress(OSError):
            while conn.recv(1):
                pass
        os._exit(137)

    threading.Thread(target=watch, name="sparkfn-launcher-watch", daemon=True).start()


def _set_cmdline(argv: list[str]) -> None:
    """Show ``argv`` as this process's command line (``/proc/self/cmdline``), if it fits."""
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
    start, end = int(fields[45]), int(fields[46])  # arg_start and arg_end (proc(5))
    text = b"\0".join(a.encode() for a in argv) + b"\0"
    if len(text) > end - start:
        return
    ctypes.memmove(start, text.ljust(end - start, b"\0"), end - start)


if __name__ == "__main__":
    for _name, _value in THREADLESS_ENV.items():
        os.environ.setdefault(_name, _value)
    # python -m sparkfn.runtime.spark.zygote SOCKET ROOM [MODULE ...]: ROOM is the
    # space for a child's command line; MODULEs replace FORKED (tests).
    sys.exit(serve(sys.argv[1], frozenset(sys.argv[3:]) or FORKED))
