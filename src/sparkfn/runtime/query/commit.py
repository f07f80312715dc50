"""A function's batch: staged in its task, committed in one transaction.

Every task that runs a function's part of a batch (a group's task,
:mod:`sparkfn.runtime.group.task`, for a member of a shared group or a
group of one) hands what the function emitted straight to
:meth:`FunctionBatchWriter.write`, in the same Python worker: the messages
are staged as segments per output topic and partition there, and the task
keeps only the small :class:`FunctionBatch` (segment references, state
mutations, stats). No message enters the JVM. The group's ``foreachBatch``
commits each member's batches on the driver
(:mod:`sparkfn.runtime.group.commit`: most members together through
:mod:`sparkfn.runtime.group.bulk`, the others with :meth:`FunctionBatchWriter.commit`'s
checks, one savepoint each).

The commit, in one store transaction: checks the run's epoch (an older run
is fenced: its commit fails with :class:`~sparkfn.api.errors.StaleRunError`
and is recorded as a system exception), moves the function's
**subscription** past the batch's input
(:func:`sparkfn.topics.subscription.commit_plan`), commits the segments of
every topic (outputs, publishes, dead letters, logs), applies the batch's
state mutations and adds its stats (kept, like the lifecycle records, under
the run's control id: a sink's are its own even when a function has the
same FQFN). A batch whose input the subscription has already passed (a
replay after a crash, under any checkpoint) is discarded, so outputs and
state changes land exactly once. A batch whose job fails commits nothing;
the segments its finished tasks staged are deleted when their rows can be
read, else by topic maintenance (never committed, they are never visible).

Two lifecycle rules are kept in the same transaction: a batch is refused
(the query fails) while an instance's death waits for the supervisor, so no
batch commits after ``context.fatal``; and the end-of-stream batch of a
drain or suspend records itself as committed, which is what the supervisor
waits for.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Connection, select

from sparkfn.api.errors import FatalError, StaleRunError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.deadletter import dead_letter_topic
from sparkfn.runtime.metrics_store import commit_stats
from sparkfn.runtime.query.executor import TaskPiece, TaskSummary
from sparkfn.runtime.stats import ExceptionInfo, InstanceStats
from sparkfn.state.store import apply_mutations, merge_mutations
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import StagedSegment, commit_segments
from sparkfn.topics.segments import Codec
from sparkfn.topics.spark.commit import (
    PartitionStager,
    commit_staged,
    kill_if_requested,
)

if TYPE_CHECKING:
    pass


@dataclass
class FunctionBatch:
    """What one task staged and summarised."""

    staged: list[tuple[str, StagedSegment]] = field(default_factory=list)
    summaries: list[TaskSummary] = field(default_factory=list)


class FunctionBatchWriter:
    """Stages a function's tagged rows in its task and commits each micro-batch exactly once."""

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

    def commit(self, messages: list[FunctionBatch | None], batchId: int) -> None:  # noqa: N803
        """Driver: commit the batch once with the subscription's move, or discard a replay."""
        store = Store.cached(self.store_url, self.data_dir)
        batches = [m for m in messages if isinstance(m, FunctionBatch)]
        staged = [seg for b in batches for _, seg in b.staged]
        try:
            commit_staged(store, staged, lambda conn: self._commit(store, conn, batches, batchId))
        except StaleRunError as exc:
            self._record_fenced(store, exc)
            raise
        kill_if_requested(batchId)  # crash tests only: see commit.KILL_AFTER_COMMIT_ENV

    def _commit(
        self, store: Store, conn: Connection, batches: list[FunctionBatch], batch_id: int
    ) -> bool:
        fqfn = self.config.fqfn
        runs = schema.function_runs
        query = select(runs.c.epoch).where(runs.c.fqfn == self.control_id)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()  # a new run's epoch bump waits for this commit
        current = conn.execute(query).scalar()
        if current is not None and current != self.epoch:
            msg = (
                f"function {fqfn}: batch {batch_id} of run epoch {self.epoch} refused: "
                f"a newer run (epoch {current}) owns the function"
            )
            raise StaleRunError(msg)
        record = control.read_control(conn, self.control_id)
        if record is not None:
            for i, inst in sorted(record.instances.items()):
                if inst.dead and not inst.handled:
                    msg = f"function {fqfn} instance {i} died ({inst.death}); batch {batch_id} not committed"
                    raise FatalError(msg)
        if (
            subscription.commit_plan(conn, self.subscription, self.epoch, owner=self.control_id)
            is None
        ):
            return False  # the subscription is past this batch's input: a replay
        commit_id = uuid.uuid4().hex
        admin = TopicAdmin(store)
        by_topic: dict[str, list[StagedSegment]] = {}
        for b in batches:
            for topic, seg in b.staged:
                by_topic.setdefault(topic, []).append(seg)
        for topic, segs in by_topic.items():
            commit_segments(store, conn, admin.get(topic, conn), segs, commit_id)
        summaries = [s for b in batches for s in b.summaries]
        apply_mutations(conn, fqfn, merge_mutations(s.mutations for s in summaries))
        self._add_stats(conn, [(s.instance_id, s.stats) for s in summaries])
        if record is not None and any(s.final for s in summaries):
            control.record_final_commit(conn, self.control_id)
        return True

    def _add_stats(self, conn: Connection, per_instance: list[tuple[int, InstanceStats]]) -> None:
        """The batch's stats, in its transaction (a group's member defers them to one write)."""
        commit_stats(conn, self.control_id, per_instance)

    def _record_fenced(self, store: Store, exc: StaleRunError) -> None:
        """A fenced commit is a system exception of the function, visible in its status."""
        stats = InstanceStats()
        stats.record_exception(ExceptionInfo.from_exception("system", exc, None))
        with store.write() as conn:
            commit_stats(conn, self.control_id, [(0, stats)])
