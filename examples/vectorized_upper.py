"""Vectorized functions: a whole batch in, a whole batch out.

Pulsar has nothing like it. Instead of one Python call per message, sparkfn
hands the function every message of a Spark task at once, as a
``pyarrow.RecordBatch`` (the default) or a ``pandas.DataFrame``. Columns:
``key``, ``value`` (a string column for ``string`` and ``json`` topics),
``properties``, ``event_time``, ``topic``, ``partition``, ``offset``. The
result needs a ``value`` column; ``key`` and ``properties`` are kept if
present. Two forms of the same function::

    --classname vectorized_upper.Upper          # the class, over pyarrow
    --classname vectorized_upper.upper_pandas   # the decorated function, over pandas
"""

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkfn import Context, VectorizedFunction, vectorized


class Upper(VectorizedFunction):
    """Uppercases every value with one Arrow kernel call per batch."""

    def process_batch(self, batch: pa.RecordBatch, context: Context) -> pa.RecordBatch:
        """Return the batch's keys with the values uppercased."""
        return pa.RecordBatch.from_arrays(
            [batch.column("key"), pc.utf8_upper(batch.column("value"))], names=["key", "value"]
        )


@vectorized(batch_format="pandas")
def upper_pandas(df: Any) -> Any:
    """The same over a pandas DataFrame."""
    return df[["key"]].assign(value=df["value"].str.upper())
