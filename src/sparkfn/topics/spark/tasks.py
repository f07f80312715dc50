"""A function run inside the reader's tasks: the data source's ``taskFunction`` option.

A query that maps every row of a ``sparkfn`` read through Python
(``readStream.format("sparkfn").load().mapInArrow(f, schema)``) moves each
row from the reader's Python worker into the JVM and out again to ``f``'s.
With ``taskFunction`` the reader applies ``f`` to its own batches in the
task, and only what ``f`` yields (of ``taskSchema``) reaches Spark: the
function runtime yields one small row per task, so its messages never
cross into the JVM at all. Spark still plans, retries and checkpoints the
batch as for any source, and tasks still run on any executor that can reach
the store and its data directory.

The function is shipped as an option, so as text: cloudpickled, base64.
"""

from __future__ import annotations

import base64
import functools
import gc
from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark import cloudpickle

TaskFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]

TASK_FUNCTION_OPTION = "taskFunction"
TASK_SCHEMA_OPTION = "taskSchema"


def encode_task_function(function: TaskFunction) -> str:
    """``function`` as the text of a ``taskFunction`` option."""
    pickled: bytes = cloudpickle.dumps(function)  # type: ignore[no-untyped-call]
    return base64.b64encode(pickled).decode("ascii")


@functools.lru_cache(maxsize=32)
def decode_task_function(spec: str) -> TaskFunction:
    """The function of a ``taskFunction`` option, unpickled once per process and option."""
    function: TaskFunction = cloudpickle.loads(base64.b64decode(spec))
    return function


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
