"""Admission planning of the sparkfn reader, without Spark: caps and task ranges."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from sparkfn.config.names import TopicName
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.message import SchemaType
from sparkfn.topics.spark.planning import TopicRange, cap, record_budget, split_ranges


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
