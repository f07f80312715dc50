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
