"""The topic sink: ``df.writeStream.format("sparkfn")``, exactly once per micro-batch.

The frame needs a ``value`` column (binary or string) and may have ``key``,
``properties`` (a string map, or JSON object text), ``event_time``,
``partition``, ``producer`` and ``sequence_id``. Rows with a ``partition`` go
there, rows with a key go to the key's hash partition, the rest are spread
evenly.

A replayed batch id of the same sink is skipped (:mod:`.commit`), so the
sink's identity must change exactly when Spark's batch ids start over: with
a new checkpoint. The sink therefore keeps an id of its own in a file of
the checkpoint directory (:data:`SINK_ID_FILE`), made with the checkpoint;
deleting the checkpoint deletes it too, and the new checkpoint's batches 0,
1, ... are new batches, not replays. A checkpoint on a file system other
than the local one (``hdfs://``, ``s3a://``) needs option ``sinkId``
instead; a new checkpoint then needs a new ``sinkId``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

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
    batch_committed,
    commit_batch_once,
    commit_staged,
    discard_staged,
    kill_if_requested,
)

SINK_ID_FILE = "sparkfn-sink-id"


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
        self.sink_id: str = sink_identity(
            str(self.topic.name), opts.get("sinkid"), opts.get("checkpointlocation")
        )
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

        commit_staged(
            store, staged, lambda conn: commit_batch_once(conn, self.sink_id, batchId, apply)
        )
        kill_if_requested(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Driver: the batch failed; delete what its tasks staged, unless the batch committed.

        Spark aborts after a failed ``commit`` too, whose COMMIT may have
        reached the store (a connection lost after the server committed):
        the staged files stay then, and whenever the store cannot tell.
        """
        store = Store.cached(self.store_url, self.data_dir)
        with store.read() as conn:
            committed = batch_committed(conn, self.sink_id, batchId)
        if not committed:
            discard_staged(store, staged_segments(messages))


def staged_segments(messages: list[WriterCommitMessage | None]) -> list[StagedSegment]:
    """The segments the tasks of a batch staged."""
    return [seg for m in messages if isinstance(m, StagedBatch) for seg in m.segments]


def sink_identity(topic: str, sink_id: str | None, checkpoint: str | None) -> str:
    """The id a topic sink's committed batches are recorded under (see the module docstring).

    ``sink_id`` as given; else the id kept in the local ``checkpoint``
    directory's :data:`SINK_ID_FILE`, made on first use.
    """
    if sink_id:
        return sink_id
    if not checkpoint:
        msg = (
            f"sparkfn sink for topic {topic}: set option 'checkpointLocation' (or 'sinkId'); "
            "it identifies the sink's committed batches"
        )
        raise ConfigError(msg)
    parsed = urlparse(checkpoint)
    if parsed.scheme not in ("", "file"):
        msg = (
            f"sparkfn sink for topic {topic}: checkpointLocation {checkpoint!r} is not on the "
            "local file system; set option 'sinkId' (and a new one with every new checkpoint)"
        )
        raise ConfigError(msg)
    directory = Path(unquote(parsed.path) if parsed.scheme else checkpoint).absolute()
    return _checkpoint_sink_id(directory)


def _checkpoint_sink_id(directory: Path) -> str:
    """The id in ``directory``'s :data:`SINK_ID_FILE`, written once, durably, never replaced.

    A checkpoint that Spark committed batches in before this file existed
    keeps the id sparkfn used then, its path, so its replays are still
    recognised.
    """
    path = directory / SINK_ID_FILE
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    # Spark writes a batch's offsets before it asks for the sink: only a
    # committed batch tells an old checkpoint from a new one.
    commits = directory / "commits"
    used = commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir())
    new_id = str(directory) if used else f"checkpoint-{uuid.uuid4().hex}"
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{SINK_ID_FILE}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(new_id + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(tmp, path)  # fails if another writer made it first: its id wins
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text(encoding="utf-8").strip()
