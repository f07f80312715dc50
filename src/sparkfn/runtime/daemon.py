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

# Imported in the daemon, before any fork: pure Python or thread-free.
PRELOAD = (
    "pyspark.worker",
    "sqlalchemy",
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


if __name__ == "__main__":
    preload()
    from pyspark import daemon

    gc.collect()
    gc.freeze()
    daemon.manager()
