"""What a read task of the ``sparkfn`` reader reads: its planned rows, as Arrow batches.

Runs on executors, from :meth:`~.reader.SparkfnStreamReader.read`. A task is
one of the planner's partitions (:mod:`.planning`): a range of one topic
partition, an instance's ranges (ending, in a drain's last batch, with its
end-of-stream marker), or a marker alone. A marker is one row with
``offset == -1`` (a tick's: ``-2``) tagged with its instance.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.message import READ_SCHEMA, SPARK_READ_TYPES, properties_to_json
from sparkfn.topics.prefetch import SegmentPrefetch
from sparkfn.topics.reading import read_range
from sparkfn.topics.spark.planning import (
    INSTANCE_FIELD,
    FinalMarker,
    InstanceRanges,
    TickMarker,
    TopicRange,
    instances_for,
)

FINAL_OFFSET = -1  # the offset of an end-of-stream marker row
TICK_OFFSET = -2  # the offset of a tick's marker row


@dataclass(frozen=True)
class TaskRows:
    """The rows a task reads, in the reader's columns (``None``: all of them)."""

    store_url: str
    data_dir: str
    columns: list[str] | None
    properties_json: bool  # properties as JSON text rather than a map
    # A query group's task: its ranges' index rows looked up, and their segments decoded, once.
    prefetch: SegmentPrefetch | None = None

    def rows(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The task's rows, each tagged with its instance where the reader has instances."""
        if isinstance(partition, FinalMarker):
            yield self.marker(partition.instance)
        elif isinstance(partition, TickMarker):
            yield self.marker(partition.instance, offset=TICK_OFFSET)
        elif isinstance(partition, TopicRange):
            yield from self._range_rows(partition)
        elif isinstance(partition, InstanceRanges):
            for span in partition.ranges:
                for batch in self._range_rows(span):
                    if span.instance == partition.instance:
                        yield batch  # a shared or failover range: all of it is the instance's
                    else:
                        yield batch.filter(
                            pc.equal(batch.column(INSTANCE_FIELD.name), partition.instance)
                        )
            if partition.final:
                yield self.marker(partition.instance)
        else:
            msg = f"sparkfn reader got a foreign partition {partition!r}"
            raise TypeError(msg)

    def _range_rows(self, partition: TopicRange) -> Iterator[pa.RecordBatch]:
        store = Store.cached(self.store_url, self.data_dir)
        batches = read_range(
            store,
            partition.topic,
            partition.partition,
            partition.start,
            partition.end,
            self.prefetch,
        )
        for batch in batches:
            out = self._shaped(batch if self.columns is None else batch.select(self.columns))
            if partition.instances is None:
                yield out
            else:
                yield out.append_column(INSTANCE_FIELD, instances_for(batch, partition))

    @staticmethod
    def ranges(
        partitions: Iterable[InputPartition],
    ) -> list[tuple[TopicInfo, int, int, int]]:
        """Every range :meth:`rows` of ``partitions`` reads, once per read:
        what a :class:`~sparkfn.topics.prefetch.SegmentPrefetch` looks up ahead."""
        out = []
        for part in partitions:
            spans = part.ranges if isinstance(part, InstanceRanges) else (part,)
            out += [
                (r.topic, r.partition, r.start, r.end) for r in spans if isinstance(r, TopicRange)
            ]
        return out

    def marker(self, instance: int, offset: int = FINAL_OFFSET) -> pa.RecordBatch:
        """The end-of-stream (or tick) marker row of ``instance``."""
        names = self.columns or list(SPARK_READ_TYPES)
        fields = [READ_SCHEMA.field(name) for name in names]
        row: dict[str, Any] = dict.fromkeys(names)
        row.update({"offset": offset, "partition": -1})
        batch = self._shaped(pa.RecordBatch.from_pylist([row], schema=pa.schema(fields)))
        return batch.append_column(INSTANCE_FIELD, pa.array([instance], pa.int32()))

    def _shaped(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not self.properties_json:
            return batch
        index = batch.schema.get_field_index("properties")
        return batch.set_column(index, "properties", properties_to_json(batch.column(index)))
