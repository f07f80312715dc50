"""A function's part of a task, staged where it ran: :class:`FunctionStager`.

Every task that runs a function's part of a batch (a group's task,
:mod:`sparkfn.runtime.group.task`, for a member of a shared group or a
group of one) hands what the function emitted straight to
:meth:`FunctionStager.write`, in the same Python worker: the messages are
staged as segments per output topic and partition there (invisible until
committed), and the task keeps only the small :class:`FunctionBatch`
(segment references, state mutations, stats). No message enters the JVM.

The batch commits on the driver, in the group's ``foreachBatch``, with
every other member's: :func:`sparkfn.runtime.group.bulk.commit_members` is
the one commit (the run's epoch, a pending death, the subscription's move,
the segments, state and stats, in one transaction). A batch whose job fails
commits nothing; the segments its finished tasks staged are deleted when
their rows can be read, else by topic maintenance (never committed, they
are never visible).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sparkfn.api.errors import StaleRunError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle.deadletter import dead_letter_topic
from sparkfn.runtime.metrics_store import commit_stats
from sparkfn.runtime.query.executor import TaskPiece, TaskSummary
from sparkfn.runtime.stats import ExceptionInfo, InstanceStats
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import StagedSegment
from sparkfn.topics.segments import Codec
from sparkfn.topics.spark.commit import PartitionStager


@dataclass
class FunctionBatch:
    """What one task staged and summarised."""

    staged: list[tuple[str, StagedSegment]] = field(default_factory=list)
    summaries: list[TaskSummary] = field(default_factory=list)


class FunctionStager:
    """Stages what a function emitted in its task, per output topic and partition."""

    def __init__(
        self,
        config: FunctionConfig,
        store_url: str,
        data_dir: str,
        *,
        epoch: int,
        control_id: str | None = None,
    ) -> None:
        self.config = config
        self.store_url = store_url
        self.data_dir = data_dir
        self.subscription = config.subscription
        self.epoch = epoch
        self.control_id = control_id or config.fqfn

    def write(self, pieces: Iterator[TaskPiece]) -> FunctionBatch:
        """In the task: stage messages per topic and partition; collect summaries."""
        store = Store.cached(self.store_url, self.data_dir)
        admin = TopicAdmin(store)
        stagers: dict[str, PartitionStager] = {}
        summaries: list[TaskSummary] = []
        for piece in pieces:
            if isinstance(piece, TaskSummary):
                summaries.append(piece)
                continue
            for topic, rows in piece.by_topic():
                stager = stagers.get(topic)
                if stager is None:
                    stager = stagers[topic] = PartitionStager(
                        store, self._topic(admin, topic), self._compression(topic)
                    )
                stager.add(rows)
        staged = [(topic, seg) for topic, st in stagers.items() for seg in st.finish()]
        return FunctionBatch(staged, summaries)

    def _topic(self, admin: TopicAdmin, name: str) -> TopicInfo:
        """An output topic; the default dead-letter and late-data topics are created
        on first use (1 partition)."""
        config = self.config
        if name not in (config.default_dead_letter_topic, config.late_data_target):
            return admin.get(name)
        return dead_letter_topic(admin, config, name)

    def _compression(self, name: str) -> Codec:
        """How the segments of topic ``name`` compress: as ``producerConfig`` says for
        what the function returns or publishes; its dead letters, logs and late
        messages as the store decides."""
        config = self.config
        producer = config.producer_config
        if producer is None or name in (
            config.dead_letter_target,
            config.log_topic,
            config.late_data_target,
        ):
            return "auto"
        return producer.compression


def record_fenced(store: Store, control_id: str, exc: StaleRunError) -> None:
    """A fenced commit is a system exception of the run, visible in its status."""
    stats = InstanceStats()
    stats.record_exception(ExceptionInfo.from_exception("system", exc, None))
    with store.write() as conn:
        commit_stats(conn, control_id, [(0, stats)])
