"""Pure batch planning for the ``sparkfn`` reader: caps, task ranges, instances.

Nothing here touches the store or Spark, so admission is unit-tested fast.
Offsets are ``{"<topic>#<partition>": next_offset}``; keys starting with
``__`` are the reader's own bookkeeping, never a partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.log import key_partitions
from sparkfn.topics.message import constant

FINAL_KEY = "__final__"  # end-of-stream batches planned so far
RESUME_KEY = "__resume__"  # bumped when a batch must differ from Spark's start (see reader)
TICK_KEY = "__tick__"  # a window's clock ticks so far (a group member's: "__tick__/<id>")
ASSIGNMENTS = ("shared", "failover", "key_shared")
INSTANCE_FIELD = pa.field("instance_id", pa.int32())


def offset_key(topic: TopicInfo, partition: int) -> str:
    """The offsets key of one topic partition."""
    return f"{topic.name}#{partition}"


def data_offsets(offsets: Mapping[str, int]) -> dict[str, int]:
    """``offsets`` without the reader's bookkeeping keys."""
    return {k: v for k, v in offsets.items() if not k.startswith("__")}


def in_key_order(offsets: Mapping[str, int]) -> dict[str, int]:
    """``offsets`` with their keys sorted: the one order the reader gives Spark.

    Spark tells offsets apart by their JSON text, so the same offsets in
    another key order are "new data" to it, and it runs a batch that reads
    nothing (and, under ``Trigger.AvailableNow``, waits for input after it).
    """
    return dict(sorted(offsets.items()))


@dataclass(frozen=True)
class TopicRange(InputPartition):
    """One Spark task's share: ``[start, end)`` of one topic partition.

    ``instance`` is the function instance the range belongs to (``shared``,
    ``failover``); ``None`` means per row, by key hash (``key_shared``).
    """

    topic: TopicInfo
    partition: int
    start: int
    end: int
    instance: int | None = None
    instances: tuple[int, ...] | None = None  # the live instances


@dataclass(frozen=True)
class InstanceRanges(InputPartition):
    """One instance's task: its rows of ``ranges``, then (``final``) its end-of-stream marker.

    Planned instead of per-range tasks when the reader runs a task function
    (:mod:`.tasks`), in two cases. ``key_shared``: each instance's rows are
    then in one task, in offset order, without a shuffle; every task reads
    the batch's ranges and keeps the rows whose key routes to it. A drain's
    last batch (:func:`with_final`): each instance's ranges in one task
    that ends with the instance's marker, so its end-of-stream hooks run
    after all of its input, in the object that processed it.
    """

    instance: int
    ranges: tuple[TopicRange, ...]
    final: bool = False


def by_instance(
    ranges: Sequence[InputPartition], live: Sequence[int], *, final: bool = False
) -> list[InputPartition]:
    """``key_shared`` ranges regrouped as one :class:`InstanceRanges` task per live instance."""
    spans = tuple(r for r in ranges if isinstance(r, TopicRange))
    return [InstanceRanges(instance, spans, final) for instance in live]


def with_final(
    ranges: Sequence[InputPartition], live: Sequence[int], assignment: str
) -> list[InputPartition]:
    """A drain's last data batch, carrying the end-of-stream markers: one task per live instance.

    Each task holds the instance's ranges (``key_shared``: every range, its
    rows chosen by key) and ends with its marker, so the batch needs no
    end-of-stream batch after it.
    """
    if assignment == "key_shared":
        return by_instance(ranges, live, final=True)
    spans = [r for r in ranges if isinstance(r, TopicRange)]
    return [InstanceRanges(i, tuple(r for r in spans if r.instance == i), final=True) for i in live]


def ends_stream(
    topics: Sequence[TopicInfo],
    spans: Mapping[str, tuple[int, int]],
    live: Sequence[int],
    *,
    max_per_task: int | None,
    assignment: str,
    slots: int | None,
) -> bool:
    """Whether a drain's last data batch, reading ``spans``, may carry the markers (:func:`with_final`).

    Only when one task per instance runs as many tasks at once as the
    batch's own plan would on ``slots`` task slots (unknown: as many as the
    plan has tasks): an end-of-stream batch costs a trigger, less than a
    batch run on fewer cores.
    """
    ranges = split_ranges(
        topics, spans, max_per_task=max_per_task, live=live, assignment=assignment
    )
    tasks = len(live) if assignment == "key_shared" else len(ranges)
    return len(live) >= (tasks if slots is None else min(slots, tasks))


@dataclass(frozen=True)
class FinalMarker(InputPartition):
    """The end-of-stream batch's task for one instance: one marker row."""

    instance: int


@dataclass(frozen=True)
class TickMarker(InputPartition):
    """A tick's task for one instance: one marker row (``offset == -2``), so that
    a function whose windows fire on the clock looks at them without input."""

    instance: int


def cap(start: Mapping[str, int], end: Mapping[str, int], budget: int) -> dict[str, int]:
    """Share ``budget`` records fairly over the partitions that have data."""
    want = {k: end[k] - start.get(k, 0) for k in end if end[k] > start.get(k, 0)}
    grant = dict.fromkeys(want, 0)
    remaining = budget
    while remaining > 0 and want:
        share = max(1, remaining // len(want))
        for key in sorted(want):
            take = min(share, want[key], remaining)
            grant[key] += take
            want[key] -= take
            remaining -= take
            if remaining == 0:
                break
        want = {k: v for k, v in want.items() if v > 0}
    return {k: start.get(k, 0) + grant.get(k, 0) for k in end}


def record_budget(
    max_records: int | None, max_bytes: int | None, bytes_per_record: float | None
) -> int | None:
    """How many records the next batch may admit: the tighter of both caps (at least 1)."""
    budgets = []
    if max_records is not None:
        budgets.append(max_records)
    if max_bytes is not None and bytes_per_record:
        budgets.append(max(1, int(max_bytes // max(bytes_per_record, 1.0))))
    return min(budgets) if budgets else None


def split_ranges(
    topics: Sequence[TopicInfo],
    spans: Mapping[str, tuple[int, int]],
    *,
    max_per_task: int | None,
    live: Sequence[int] | None,
    assignment: str,
) -> list[InputPartition]:
    """Split ``spans`` (``key: (lo, hi)``) into tasks, each tagged with its instance.

    Without ``live``: tasks of at most ``max_per_task`` records. ``shared``:
    ranges are cut so every live instance gets a share and dealt
    round-robin. ``failover``: one task per topic partition, owned by
    instance ``partition index % live``. ``key_shared``: the instance is
    chosen per row by key hash when the range is read.
    """
    parts = []
    index = 0
    for topic in topics:
        for part in range(topic.partitions):
            lo, hi = spans.get(offset_key(topic, part), (0, 0))
            if hi > lo:
                parts.append((topic, part, index + part, lo, hi))
        index += topic.partitions
    total = sum(hi - lo for *_, lo, hi in parts)
    step = max_per_task or max(total, 1)
    owners = tuple(live) if live is not None else None
    if owners and assignment == "shared":
        step = max(1, min(step, -(-total // len(owners))))
    ranges: list[TopicRange] = []
    for topic, part, position, lo, hi in parts:
        if owners and assignment == "failover":
            owner = owners[position % len(owners)]
            ranges.append(TopicRange(topic, part, lo, hi, owner, owners))
            continue
        for first in range(lo, hi, step):
            ranges.append(TopicRange(topic, part, first, min(hi, first + step), None, owners))
    if owners and assignment == "shared":
        ranges = [replace(r, instance=owners[i % len(owners)]) for i, r in enumerate(ranges)]
    return list(ranges)


def instances_for(batch: pa.RecordBatch, partition: TopicRange) -> pa.Array:
    """The instance of each row of ``batch``, read from ``partition``."""
    if partition.instance is not None:
        return constant(partition.instance, pa.int32(), batch.num_rows)
    owners = partition.instances or (0,)
    n = len(owners)
    spread = pa.array(np.asarray(batch.column("offset")) % n, pa.int32())  # rows without a key
    slots = pc.coalesce(key_partitions(batch.column("key"), n), spread)
    return pa.array(np.asarray(owners, dtype=np.int32)[np.asarray(slots)], pa.int32())
