"""The topic sink: ``df.writeStream.format("sparkfn")``, exactly once per micro-batch.

The frame needs a ``value`` column (binary or string) and may have ``key``,
``properties`` (a string map, or JSON object text), ``event_time``,
``partition``, ``producer`` and ``sequence_id``. Rows with a ``partition`` go
there, rows with a key go to the key's hash partition, the rest are spread
evenly. The sink's identity is its ``checkpointLocation`` (or ``sinkId``):
a replayed batch id of the same sink is skipped (:mod:`.commit`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType
from sqlalchemy import Connection

from sparkfn.api.errors import ConfigError
from sparkfn.config.settings import Settings
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.log import StagedSegment, commit_segments
from sparkfn.topics.spark.commit import (
    PartitionStager,
    commit_batch_once,
    discard_staged,
    kill_if_requested,
)


@dataclass
class StagedBatch(WriterCommitMessage):
    """What one writer task staged, sent to the driver's commit."""

    segments: list[StagedSegment]


class SparkfnStreamWriter(DataSourceStreamArrowWriter):
    """Writes a topic exactly once per micro-batch (see the module docstring)."""

    def __init__(self, opts: dict[str, str], schema_: StructType) -> None:
        settings = Settings.resolve(opts.get("datadir"), opts.get("storeurl"))
        self.store_url = settings.store_url
        self.data_dir = str(settings.data_dir)
        name = opts.get("topic")
        if not name:
            msg = "sparkfn data source: option 'topic' is required for writing"
            raise ConfigError(msg)
        self.topic = TopicAdmin(Store.cached(self.store_url, self.data_dir)).get(name)
        sink_id = opts.get("sinkid") or opts.get("checkpointlocation")
        if not sink_id:
            msg = (
                f"sparkfn sink for topic {self.topic.name}: set option 'checkpointLocation' "
                "(or 'sinkId'); it identifies the sink's committed batches"
            )
            raise ConfigError(msg)
        self.sink_id: str = sink_id
        fields = set(schema_.fieldNames())
        if "value" not in fields:
            msg = f"sparkfn sink for topic {self.topic.name}: the frame needs a 'value' column; has {sorted(fields)}"
            raise ConfigError(msg)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatch:
        """Runs on an executor: route rows to partitions and stage segments."""
        stager = PartitionStager(Store.cached(self.store_url, self.data_dir), self.topic)
        for batch in iterator:
            stager.add(batch)
        return StagedBatch(stager.finish())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Driver: make the batch visible once; a replayed ``batchId`` is skipped."""
        store = Store.cached(self.store_url, self.data_dir)
        staged = staged_segments(messages)

        def apply(conn: Connection, commit_id: str) -> None:
            commit_segments(store, conn, self.topic, staged, commit_id)

        if not commit_batch_once(store, self.sink_id, batchId, apply):
            discard_staged(store, staged)
        kill_if_requested(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Driver: a task failed; delete what the others staged."""
        store = Store.cached(self.store_url, self.data_dir)
        discard_staged(store, staged_segments(messages))


def staged_segments(messages: list[WriterCommitMessage | None]) -> list[StagedSegment]:
    """The segments the tasks of a batch staged."""
    return [seg for m in messages if isinstance(m, StagedBatch) for seg in m.segments]
