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
they stay there. ``tests/runtime/test_daemon.py`` checks that the list
below starts none.

What the daemon imported is then frozen out of the garbage collector
(``gc.freeze``). pyspark's daemon runs a full ``gc.collect()`` in a reused
worker after every task, and a full collection walks every object the
process holds: with SQLAlchemy, pydantic, pyarrow and pandas loaded, about
70 ms of CPU per task, more than a small micro-batch's work. Frozen objects
are skipped (and their pages, shared with the daemon since the fork, are
not written by the collector, so they stay shared). The worker freezes what
its first task imported too: see :func:`sparkfn.topics.spark.tasks.freeze_imports`.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Callable
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
    :func:`sparkfn.runtime.spark.spark_session`) that last flush fails at
    once with ``BrokenPipeError``, and pyspark's daemon printed its
    traceback on the driver's console every time; over TCP the write went
    unnoticed. Nobody reads that connection any more, so nothing is lost:
    the worker ends as one not to be reused does. The zygote runs pyspark's
    own daemon (the data sources' planning calls) through this too.
    """
    from pyspark import daemon

    daemon.worker = quiet(daemon.worker)
    daemon.manager()


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
