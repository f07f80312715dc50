"""What every read task of sparkfn's sources does once per Python worker process.

A group's reader (:mod:`sparkfn.runtime.group.reader`) and the ``sparkfn``
source's hand their tasks' batches through :func:`freeze_imports`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pyarrow as pa

_frozen = False


def freeze_imports(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``; then, once per process, freeze what it holds out of the garbage collector.

    A Python worker imports numpy, pyarrow and pandas (and the user's code)
    in its first task, after the daemon's fork; pyspark then runs a full
    ``gc.collect()`` after every task, which walks all of them each time
    (see :mod:`sparkfn.runtime.spark.daemon`). Collected once and frozen when the
    first task is done, they are skipped from then on. What becomes garbage
    later among the frozen objects is kept: one task's worth of objects, at
    most, in a process's life.
    """
    global _frozen  # noqa: PLW0603 - once per process, by design
    yield from batches
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()
