"""Segment lookups of the log: a read starting mid-segment, and size estimates."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from sparkfn.store.store import Store
from sparkfn.topics import log, reading, segments
from sparkfn.topics import prefetch as prefetch_module
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.message import STORED_SCHEMA, Message
from sparkfn.topics.producer import Producer


def _fill(store: Store, segments: int, per_segment: int, size: int) -> TopicInfo:
    info = TopicAdmin(store).create("t")
    producer = Producer(store, "t")
    for s in range(segments):
        producer.send_batch(
            [
                Message(f"{s * per_segment + i:06d}".encode().ljust(size, b"."))
                for i in range(per_segment)
            ]
        )
    return info


def _values(store: Store, info: TopicInfo, start: int, end: int | None) -> list[int]:
    batches = reading.read_range(store, info, 0, start, end)
    return [int(v.as_py()[:6]) for b in batches for v in b.column("value")]


def test_a_read_from_any_offset_starts_in_the_segment_holding_it(store: Store) -> None:
    info = _fill(store, segments=50, per_segment=10, size=20)
    for start, end in [(0, 500), (7, 13), (10, 11), (255, 500), (499, None), (123, 377)]:
        stop = 500 if end is None else end
        assert _values(store, info, start, end) == list(range(start, stop))
    assert _values(store, info, 500, None) == []


def test_ranges_fetched_ahead_read_what_their_own_lookups_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group task's prefetch: one query for all its small ranges, each shared segment
    decoded once, and every read (a range read twice included) the same as its own."""
    info = _fill(store, segments=50, per_segment=10, size=20)
    decoded: list[int] = []  # the first offset of each segment decoded
    plain = segments.decode

    def counted(data: bytes) -> pa.Table:
        table = plain(data)
        decoded.append(int(table.column("value")[0].as_py()[:6]))
        return table

    monkeypatch.setattr(segments, "decode", counted)
    monkeypatch.setattr(prefetch_module, "PREFETCH_ROWS", 30)
    monkeypatch.setattr(prefetch_module, "RANGES_PER_QUERY", 4)  # two statements
    wanted = [(7, 13), (13, 15), (10, 11), (255, 261), (255, 261), (490, 500), (3, 400)]
    prefetch = prefetch_module.SegmentPrefetch(store, [(info, 0, lo, hi) for lo, hi in wanted])
    for lo, hi in wanted:
        batches = reading.read_range(store, info, 0, lo, hi, prefetch)
        values = [int(v.as_py()[:6]) for b in batches for v in b.column("value")]
        assert values == list(range(lo, hi))
    # (3, 400) was too large to fetch ahead: it looked itself up and decoded its own.
    assert decoded.count(10) == 2  # once for the three small ranges, once for (3, 400)
    assert decoded.count(250) == 2  # once for both reads of (255, 261), once for (3, 400)
    assert decoded.count(490) == 1
    assert prefetch.rows(info, 0, 255, 261) is None  # both reads had their rows
    assert not prefetch._decoded  # nothing held after its last read


def test_stored_sizes_sample_the_segments_from_an_offset_on(store: Store) -> None:
    info = _fill(store, segments=300, per_segment=10, size=100)
    with store.read() as conn:
        size, count = log.stored_sizes(conn, info, 0, 0)
        assert count == log.SIZE_SAMPLE * 10  # the sample, not the whole partition
        assert size > 0
        _, from_mid = log.stored_sizes(conn, info, 0, 2_995)  # only the last segment holds it
        assert from_mid == 10
        assert log.stored_sizes(conn, info, 0, 1_000)[1] == 2_000  # the 200 segments from 1,000


def test_segment_files_compress_values_that_compress(tmp_path: Path) -> None:
    n = 5_000
    texts = [f'{{"user": {i}, "event": "click", "page": "/p/{i % 97}"}}'.encode() for i in range(n)]
    noise = [os.urandom(100) for _ in range(n)]
    for values, expected in [(texts, "lz4"), (noise, None)]:
        table = _stored(values)
        assert segments.file_compression(table) == expected
        assert segments.file_compression(table.slice(1_000, 2_000)) == expected
        size = segments.write_table_file(tmp_path, f"s-{expected}.arrow", table)
        assert segments.read_file(tmp_path, f"s-{expected}.arrow").equals(table)
        assert size >= table.nbytes  # the index counts data uncompressed
    on_disk = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    assert on_disk["s-lz4.arrow"] < _stored(texts).nbytes / 2


def _stored(values: list[bytes]) -> pa.Table:
    n = len(values)
    return pa.Table.from_pydict(
        {
            "key": [f"k{i}" for i in range(n)],
            "value": values,
            "properties": [None] * n,
            "event_time": [None] * n,
            "publish_time": [datetime.now(UTC)] * n,
            "producer": [None] * n,
            "sequence_id": [None] * n,
        },
        schema=STORED_SCHEMA,
    )
