"""Admission planning of the sparkfn reader, without Spark: caps and task ranges."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from sparkfn.config.names import TopicName
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.message import SchemaType
from sparkfn.topics.spark.planning import (
    InstanceRanges,
    TopicRange,
    cap,
    ends_stream,
    record_budget,
    split_ranges,
    with_final,
)


def _topic(name: str, partitions: int, topic_id: int = 1) -> TopicInfo:
    return TopicInfo(
        topic_id,
        TopicName.parse(name),
        partitions,
        SchemaType.BYTES,
        None,
        None,
        datetime.now(UTC),
    )


def test_budget_is_the_tighter_cap() -> None:
    assert record_budget(1000, None, None) == 1000
    assert record_budget(1000, 10_000, 100.0) == 100  # bytes bind: 10 kB / 100 B
    assert record_budget(50, 10_000, 100.0) == 50
    assert record_budget(None, 10, 1000.0) == 1  # a record bigger than the cap still moves
    assert record_budget(None, None, None) is None


@given(
    st.dictionaries(st.sampled_from(["a#0", "a#1", "b#0"]), st.integers(0, 1000), min_size=1),
    st.integers(0, 500),
    st.integers(1, 400),
)
def test_cap_never_exceeds_the_budget_nor_the_available(
    start: dict[str, int], extra: int, budget: int
) -> None:
    end = {k: v + extra + i for i, (k, v) in enumerate(sorted(start.items()))}
    capped = cap(start, end, budget)
    admitted = sum(capped[k] - start[k] for k in end)
    assert admitted == min(budget, sum(end[k] - start[k] for k in end))
    assert all(start[k] <= capped[k] <= end[k] for k in end)


def test_shared_ranges_are_dealt_to_live_instances_only() -> None:
    topic = _topic("in", 2)
    ranges = split_ranges(
        [topic],
        {"public/default/in#0": (0, 100), "public/default/in#1": (10, 60)},
        max_per_task=1000,
        live=[0, 2],
        assignment="shared",
    )
    assert all(isinstance(r, TopicRange) for r in ranges)
    owners = {r.instance for r in ranges if isinstance(r, TopicRange)}
    assert owners == {0, 2}
    covered = sum(r.end - r.start for r in ranges if isinstance(r, TopicRange))
    assert covered == 150


def test_failover_gives_each_partition_to_one_instance() -> None:
    topic = _topic("in", 3)
    spans = {f"public/default/in#{p}": (0, 10) for p in range(3)}
    ranges = split_ranges([topic], spans, max_per_task=4, live=[0, 1], assignment="failover")
    by_partition = {(r.partition, r.instance) for r in ranges if isinstance(r, TopicRange)}
    assert by_partition == {(0, 0), (1, 1), (2, 0)}


def test_without_instances_tasks_respect_max_per_task() -> None:
    topic = _topic("in", 1)
    ranges = split_ranges(
        [topic], {"public/default/in#0": (0, 25)}, max_per_task=10, live=None, assignment="shared"
    )
    assert [(r.start, r.end) for r in ranges if isinstance(r, TopicRange)] == [
        (0, 10),
        (10, 20),
        (20, 25),
    ]


def test_a_drains_last_batch_gives_each_instance_one_task_ending_with_its_marker() -> None:
    topic = _topic("t", 4)
    spans = {f"public/default/t#{p}": (0, 100) for p in range(4)}
    ranges = split_ranges([topic], spans, max_per_task=None, live=[0, 1], assignment="shared")
    tasks = with_final(ranges, [0, 1], "shared")
    assert all(isinstance(t, InstanceRanges) and t.final for t in tasks)
    by_task = {t.instance: t.ranges for t in tasks if isinstance(t, InstanceRanges)}
    assert sorted(by_task) == [0, 1]
    # Every range is in the task of its own instance, once.
    assert sorted(ranges, key=str) == sorted((r for rs in by_task.values() for r in rs), key=str)
    assert all(r.instance == i for i, rs in by_task.items() for r in rs)
    # An instance without input in the batch still gets its marker.
    alone = with_final(ranges[:1], [0, 1], "failover")
    assert [(t.instance, len(t.ranges)) for t in alone if isinstance(t, InstanceRanges)] == [
        (0, 1),
        (1, 0),
    ]
    # key_shared: every task reads every range and keeps its instance's keys.
    keyed = split_ranges([topic], spans, max_per_task=None, live=[0, 1], assignment="key_shared")
    assert all(
        isinstance(t, InstanceRanges) and t.final and len(t.ranges) == 4
        for t in with_final(keyed, [0, 1], "key_shared")
    )


def test_the_markers_ride_on_the_data_only_when_that_costs_no_task_slots() -> None:
    topic = _topic("t", 4)
    spans = {f"public/default/t#{p}": (0, 100) for p in range(4)}

    def ends(live: list[int], assignment: str, slots: int | None) -> bool:
        return ends_stream(
            [topic], spans, live, max_per_task=None, assignment=assignment, slots=slots
        )

    assert ends([0, 1], "shared", 2)  # 4 ranges on 2 slots: 2 tasks run as many at once
    assert not ends([0], "shared", 2)  # 1 task would leave a slot idle
    assert ends([0], "shared", 1)
    assert not ends([0, 1], "shared", None)  # slots unknown: only as many tasks as planned
    assert ends([0, 1, 2, 3], "shared", None)
    assert ends([0], "key_shared", 8)  # one task per instance anyway
    assert ends([0, 1], "failover", 2)
    assert not ends([0, 1], "failover", 4)
