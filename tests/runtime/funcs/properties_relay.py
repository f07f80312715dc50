"""Properties tests: what a function sees of a message's properties, and passes on."""

import pyarrow as pa

from sparkfn import Context, VectorizedFunction


def process(input: str, context: Context) -> str:
    seen = context.get_message_properties()
    context.publish("side", input, properties={**seen, "seen": str(len(seen))})
    return input


class Relay(VectorizedFunction):
    """Returns its input batch's key, value and properties (a map column) unchanged."""

    def process_batch(self, batch: pa.RecordBatch, context: Context) -> pa.RecordBatch:
        assert batch.schema.field("properties").type == pa.map_(pa.string(), pa.string())
        return batch.select(["key", "value", "properties"])
