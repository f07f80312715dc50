"""A small batch's per-row columns, made in Python, equal the ones Arrow makes for a big one.

``InputRows`` makes the topic check, the UTF-8 values and the output's origin
properties in Python up to ``SMALL_BATCH`` rows (a group's slices are mostly a
few messages), by Arrow's compute functions above it. Both ways, on the same
rows: partitioned and plain topics, nulls, values that are not UTF-8.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkfn.runtime.function import rows as rows_module
from sparkfn.runtime.function.rows import InputRows
from sparkfn.topics.message import PROPERTIES

CASES = {
    "one plain topic": (["t/ns/a"] * 4, [0, 0, 0, 0], [1, 2, 3, 4], [b"x", b"y", None, b"z"]),
    "partitions past 0": (["t/ns/a"] * 3, [0, 2, 1], [5, 6, 7], [b"x", b"y", b"z"]),
    "two topics, one partitioned": (["t/ns/a", "t/ns/p", "t/ns/a"], [0, 0, 0], [1, 2, 3], [b"1", b"2", b"3"]),
    "nulls": ([None, "t/ns/a", "t/ns/a"], [0, None, 1], [1, 2, None], [b"1", b"2", b"3"]),
    "not UTF-8": (["t/ns/a"] * 2, [0, 0], [1, 2], [b"ok", b"\xff\xfe"]),
}  # fmt: skip


def _rows(topics: list, partitions: list, offsets: list, values: list) -> InputRows:
    n = len(topics)
    batch = pa.record_batch(
        {
            "key": pa.array([None] * n, pa.string()),
            "value": pa.array(values, pa.binary()),
            "properties": pa.array([[]] * n, PROPERTIES),
            "topic": pa.array(topics, pa.string()),
            "partition": pa.array(partitions, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
        }
    )
    return InputRows(batch, partitioned=lambda topic, _: topic == "t/ns/p")


def _made(case: tuple) -> tuple:
    rows = _rows(*case)
    return (
        rows.only_topic(),
        rows.strings(),
        rows.output_properties_map(True).to_pylist(),
        rows.origin_properties().to_pylist(),
    )


@pytest.mark.parametrize("name", CASES)
def test_python_and_arrow_make_the_same_columns(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    small = _made(CASES[name])
    monkeypatch.setattr(rows_module, "SMALL_BATCH", 0)  # Arrow's way, as for a big batch
    assert small == _made(CASES[name])


def test_a_partitioned_rows_origin_names_its_partition() -> None:
    topic, _, properties, _ = _made(CASES["two topics, one partitioned"])
    assert topic is None  # two topics
    assert properties[1] == [
        ("__pfn_input_topic__", "persistent://t/ns/p-partition-0"),
        ("__pfn_input_msg_id__", "0:2"),
    ]
