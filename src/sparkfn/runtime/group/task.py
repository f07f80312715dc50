"""A group's task, on an executor: each member's slice run and staged, failures kept apart.

A slice is run exactly as a function's own query runs its task
(:func:`~sparkfn.runtime.query.executor.make_run_function` over the slice's
rows, then :meth:`~sparkfn.runtime.query.staging.FunctionStager.write`), with
one difference: a member's failure (its code raises out of the runtime,
``context.fatal``, a cancel) is recorded as that member's death, closes
only that member's objects in this process, and the task goes on with the
other members. The task yields one row: the pickled list of
:class:`SliceResult`, which the group's commit takes member by member.
"""

from __future__ import annotations

import itertools
import pickle
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkfn.api.errors import FatalError
from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.function.redelivery import as_delivered
from sparkfn.runtime.group import overrun, suspects
from sparkfn.runtime.group.members import parsed_config
from sparkfn.runtime.group.plan import GroupTask, MemberSlice
from sparkfn.runtime.lifecycle.deadletter import dead_letter_topic
from sparkfn.runtime.lifecycle.workerctl import CancelledError
from sparkfn.runtime.query.executor import make_run_function
from sparkfn.runtime.query.staging import FunctionBatch, FunctionStager
from sparkfn.runtime.spark import daemon
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.prefetch import SegmentPrefetch
from sparkfn.topics.spark.commit import kill_after_stage_if_requested
from sparkfn.topics.spark.planning import FinalMarker, InstanceRanges, TopicRange
from sparkfn.topics.spark.rows import TaskRows

# What the Context can expose; publish_time, producer and sequence_id it cannot.
COLUMNS = ["key", "value", "properties", "event_time", "topic", "partition", "offset"]


@dataclass(frozen=True)
class SliceResult:
    """What one member's slice of a task came to: its staged batch, or why it failed."""

    control_id: str
    epoch: int
    spec: str  # the member's config as JSON: pickled as it is, parsed once per process
    batch: FunctionBatch | None
    error: str | None = None
    instance: int = 0  # an instance the slice ran, to charge a failure to
    charge: bool = False  # a death to record (not a cancel, nor a fatal recorded already)
    capped: bool = False  # the member had more data than its row budget admitted
    seconds: float = 0.0  # how long the slice ran

    @property
    def config(self) -> FunctionConfig:
        """The member's function config (a pickled FunctionConfig cost each slice tens of
        microseconds both ways; its JSON text costs nothing and is parsed once)."""
        return parsed_config(self.spec)


def _instance_of(slice_: MemberSlice) -> int:
    for part in slice_.parts:
        if isinstance(part, FinalMarker | InstanceRanges):
            return part.instance
        if isinstance(part, TopicRange) and part.instance is not None:
            return part.instance
    return 0


class SliceWriter(FunctionStager):
    """A member's stager in a group's task: its output topics looked up once per task."""

    def __init__(self, *args: Any, known: Mapping[TopicName, TopicInfo], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.known = known

    def _topic(self, admin: TopicAdmin, name: str) -> TopicInfo:
        if name == self.config.retry_topic:  # made on first use, as the dead-letter topic
            return dead_letter_topic(admin, self.config, name)
        found = self.known.get(TopicName.parse(name))
        return found if found is not None else super()._topic(admin, name)


def output_topics(store_url: str, data_dir: str, task: GroupTask) -> dict[TopicName, TopicInfo]:
    """The output topics of every slice of ``task``, in one query: a lookup per slice was a
    tenth of a one-message slice's time."""
    names = {s.config.output for s in task.slices if s.config.output}
    store = Store.cached(store_url, data_dir)
    with store.read() as conn:
        return TopicAdmin(store).get_many(names, conn)


def run_slice(
    store_url: str,
    data_dir: str,
    slice_: MemberSlice,
    task: GroupTask | None = None,
    known: Mapping[TopicName, TopicInfo] | None = None,
    prefetch: SegmentPrefetch | None = None,
) -> SliceResult:
    """Run one member's slice and stage its output; a failure is returned, not raised."""
    rows = TaskRows(store_url, data_dir, COLUMNS, properties_json=False, prefetch=prefetch)
    config = slice_.config
    run = make_run_function(
        config,
        store_url,
        data_dir,
        slice_.version,
        slice_.epoch,
        slice_.control_id,
        isolated=True,
        exit_note=slice_.exit_note,
    )
    writer = SliceWriter(
        config,
        store_url,
        data_dir,
        epoch=slice_.epoch,
        control_id=slice_.control_id,
        known=known or {},
    )
    batches: Iterator[pa.RecordBatch]
    batches = itertools.chain.from_iterable(rows.rows(part) for part in slice_.parts)
    if config.negative_acks:  # a redelivered message is given as its original
        batches = as_delivered(batches, config.retry_topic)
    started = time.monotonic()
    if task is not None:
        overrun.SLICES.begin(
            data_dir, task.group, slice_.control_id, slice_.epoch, task.member_seconds
        )
    try:
        staged = writer.write(run(batches))
    except Exception as exc:  # noqa: BLE001 - the member's, kept to the member
        error = f"{type(exc).__name__}: {exc}"
        charge = not isinstance(exc, CancelledError | FatalError)
        return SliceResult(
            slice_.control_id, slice_.epoch, slice_.spec, None, error, _instance_of(slice_), charge
        )
    finally:
        overrun.SLICES.end()
    return SliceResult(
        slice_.control_id,
        slice_.epoch,
        slice_.spec,
        staged,
        capped=slice_.capped,
        seconds=time.monotonic() - started,
    )


def run_group_task(store_url: str, data_dir: str, task: GroupTask) -> Iterator[pa.RecordBatch]:
    """Every slice of ``task``, then one row: the pickled :class:`SliceResult` list."""
    # A worker that dies in the task has its exit status written (see suspects.exit_file).
    first = task.slices[0].control_id if task.slices else ""
    exit_file = suspects.exit_file(data_dir, task.group, first)
    exit_file.parent.mkdir(parents=True, exist_ok=True)
    note = daemon.note_exit_to(exit_file)
    try:
        known = output_topics(store_url, data_dir, task)
        # The index rows of every slice's ranges in one query, not a query per range.
        ranges = TaskRows.ranges(p for s in task.slices for p in s.parts)
        prefetch = SegmentPrefetch(Store.cached(store_url, data_dir), ranges)
        results = [run_slice(store_url, data_dir, s, task, known, prefetch) for s in task.slices]
        kill_after_stage_if_requested()  # crash tests only: see commit.KILL_AFTER_STAGE_ENV
    finally:
        if note is not None:
            daemon.forget_note(note)
    yield pa.record_batch([pa.array([pickle.dumps(results)], pa.binary())], names=["payload"])
