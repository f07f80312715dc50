"""Spark's Python daemon, with what sparkfn's Python workers import loaded once.

Spark starts one daemon per executor (``python -m pyspark.daemon``) and
forks a Python worker from it for every task that finds no idle worker:
each query start, each parallel task, each worker a failed task ended. Every
fork then imports what sparkfn's tasks need, about 0.4 s of CPU for
SQLAlchemy, pydantic, psycopg and sparkfn's store and config. ``spark_session``
makes this module the daemon (``spark.python.daemon.module``), so the fork
inherits them instead.

Only modules that start no thread on import are loaded here: ``fork()``
copies the forking thread alone, so a thread's lock held at fork time would
stay locked in every worker. numpy, pyarrow and pandas start threads when
imported, which is why pyspark itself imports its worker after the fork;
they stay there. ``tests/runtime/spark/test_daemon.py`` checks that the list
below starts none.

What the daemon imported is then frozen out of the garbage collector
(``gc.freeze``). pyspark's daemon runs a full ``gc.collect()`` in a reused
worker after every task, and a full collection walks every object the
process holds: with SQLAlchemy, pydantic, pyarrow and pandas loaded, about
70 ms of CPU per task, more than a small micro-batch's work. Frozen objects
are skipped (and their pages, shared with the daemon since the fork, are
not written by the collector, so they stay shared). The worker freezes what
its first task imported too: see :func:`sparkfn.topics.spark.tasks.freeze_imports`.

**Exit statuses.** Spark reports a worker that died under its task only as
"Python worker exited unexpectedly (crashed)"; pyspark's daemon ignores
``SIGCHLD``, so the status is lost. This daemon reaps its workers instead
(:func:`reap`), and a worker that wants its status known leaves a note
first (:func:`note_exit_to`, named by its pid in :func:`notes_dir`): if it
then ends with a status other than 0, the daemon writes the status (as
``os.waitpid`` gives it) to the file the note names. The supervisor reads
it to say how a message killed its worker
(:mod:`sparkfn.runtime.lifecycle.poison`).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

# Imported in the daemon, before any fork: pure Python or thread-free.
PRELOAD = (
    "pyspark.worker",
    "sqlalchemy",
    "sqlite3",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "psycopg",
    "pydantic",
    "yaml",
    "sparkfn.api.function",
    "sparkfn.api.lifecycle",
    "sparkfn.config.function",
    "sparkfn.store.store",
)


def preload() -> None:
    """Import :data:`PRELOAD`; a module that fails to import is left to the worker."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the worker reports it where it matters, in a task
            sys.stderr.write(f"sparkfn daemon: not preloading {name}: {exc}\n")


def serve() -> None:
    """Run pyspark's daemon, with workers that end quietly when Spark has hung up on them.

    Spark retires a Python worker idle for a minute by closing its
    connection; the worker, waiting for its next task, reads the end,
    writes its error report and exits. Over Unix sockets (see
    :func:`sparkfn.runtime.spark.session.spark_session`) that last flush fails at
    once with ``BrokenPipeError``, and pyspark's daemon printed its
    traceback on the driver's console every time; over TCP the write went
    unnoticed. Nobody reads that connection any more, so nothing is lost:
    the worker ends as one not to be reused does. The zygote runs pyspark's
    own daemon (the data sources' planning calls) through this too.
    """
    from pyspark import daemon

    daemon.worker = quiet(daemon.worker)
    daemon.signal = ReapingSignals(keep_notes())  # type: ignore[assignment,attr-defined]
    daemon.manager()


def notes_dir(daemon_pid: int) -> Path:
    """Where the workers of daemon ``daemon_pid`` leave their exit notes (this machine's temp dir)."""
    return Path(tempfile.gettempdir()) / f"sparkfn-daemon-{daemon_pid}"


def note_exit_to(target: Path) -> Path | None:
    """In a Python worker: have the daemon write this process's exit status to ``target`` if it dies.

    Returns the note, to remove (:meth:`Path.unlink`) once the work it
    covers is done; ``None`` when the worker's parent is not this daemon.
    """
    parent = os.getppid()
    if os.environ.get(NOTES_ENV) != str(parent):
        return None  # only a sparkfn daemon reaps its workers' notes; it says so to them
    # The folder lives only while it holds notes (see forget_note): a daemon that ends
    # without its exit handlers, as pyspark's does when its Spark stops, leaves nothing.
    folder = notes_dir(parent)
    note = folder / str(os.getpid())
    for _ in range(3):  # another worker may remove the folder between the two calls
        folder.mkdir(parents=True, exist_ok=True)
        try:
            note.write_text(str(target))
        except FileNotFoundError:
            continue
        return note
    return None


def forget_note(note: Path) -> None:
    """The work ``note`` covers is done: remove it, and its folder if it holds no other."""
    note.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # another worker's note is there
        note.parent.rmdir()


# Set by a daemon that keeps notes (keep_notes) for the workers it forks: its pid.
NOTES_ENV = "SPARKFN_DAEMON_NOTES"


def keep_notes() -> Path:
    """The daemon's notes folder (its workers make it when they first need it), removed
    when the daemon exits; folders of daemons that were killed are removed now."""
    folder = notes_dir(os.getpid())
    sweep_notes()
    owner = os.getpid()
    os.environ[NOTES_ENV] = str(owner)  # its workers inherit it

    def remove() -> None:
        if os.getpid() == owner:  # not in a forked worker
            shutil.rmtree(folder, ignore_errors=True)

    atexit.register(remove)
    return folder


def sweep_notes() -> None:
    """Remove the notes folders of daemons that have ended.

    A daemon removes its own as it exits, but pyspark's daemon ends without
    running its exit handlers when its Spark stops: the driver's process
    calls this at its exit too (:func:`sparkfn.runtime.spark.session.spark_session`),
    and so does every daemon as it starts.
    """
    for stale in notes_dir(0).parent.glob("sparkfn-daemon-*"):
        pid = stale.name.rpartition("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)


def reap(folder: Path) -> None:
    """Reap every ended child; the status of one that left a note and did not end with 0 is written."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        note = folder / str(pid)
        try:
            target = Path(note.read_text())
        except OSError:
            continue
        forget_note(note)
        if status != 0:
            with contextlib.suppress(OSError):  # the data dir is gone: nobody asks any more
                partial = target.with_name(f".{target.name}.{pid}")
                partial.write_text(str(status))
                partial.replace(target)


class ReapingSignals:
    """pyspark's daemon's ``signal`` module, with ``SIGCHLD`` reaped by :func:`reap`, not ignored."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder

    def __getattr__(self, name: str) -> Any:
        return getattr(signal, name)

    def signal(self, signum: int, handler: Any) -> Any:
        """``signal.signal``; ignoring ``SIGCHLD`` becomes reaping (and stays so in the workers,
        which set it back to the default themselves)."""
        if signum == signal.SIGCHLD and handler == signal.SIG_IGN:
            folder = self._folder
            return signal.signal(signum, lambda *_: reap(folder))
        return signal.signal(signum, handler)


Worker = TypeVar("Worker", bound=Callable[..., int])


def quiet(spark_worker: Worker) -> Worker:
    """pyspark's daemon ``worker``, ending with status 1 (not reused) where Spark hung up."""

    def worker(sock: Any, authenticated: bool) -> int:
        try:
            return int(spark_worker(sock, authenticated))
        except BrokenPipeError:
            return 1

    return cast(Worker, worker)


if __name__ == "__main__":
    preload()
    gc.collect()
    gc.freeze()
    serve()
