"""Retention, compaction and garbage collection, alone and under concurrent readers."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from topic_data import stored_table

from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics import garbage, maintenance, segments
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.log import end_offsets
from sparkfn.topics.message import Message, ReceivedMessage, messages_from_table
from sparkfn.topics.producer import Producer
from sparkfn.topics.reading import read_range
from waiting import until

HOUR = timedelta(hours=1)
BIG = b"B" * (segments.INLINE_LIMIT + 1000)  # one message this size makes a file segment
FAR_FUTURE = timedelta(days=365)


def _read(
    store: Store, topic: TopicInfo, partition: int = 0, start: int = 0
) -> list[ReceivedMessage]:
    return [m for b in read_range(store, topic, partition, start) for m in messages_from_table(b)]


def _fields(messages: list[ReceivedMessage]) -> list[tuple[object, ...]]:
    return [
        (
            m.partition,
            m.offset,
            m.key,
            m.value,
            m.properties,
            m.event_time,
            m.publish_time,
            m.producer,
            m.sequence_id,
        )
        for m in messages
    ]


# the shared bounded wait (tests/waiting.py), with this module's timeout
_wait_for = partial(until, every=0.01)


def _segment_rows(store: Store, topic: TopicInfo, partition: int = 0) -> list:  # type: ignore[type-arg]
    seg = schema.segments
    with store.read() as conn:
        return conn.execute(
            select(seg.c.base_offset, seg.c.count, seg.c.size_bytes, seg.c.location)
            .where(seg.c.topic_id == topic.id, seg.c.partition == partition)
            .order_by(seg.c.base_offset)
        ).all()


def _segment_files(store: Store) -> set[str]:
    root = store.data_dir / "segments"
    return (
        {str(p.relative_to(store.data_dir)) for p in root.rglob("*.arrow")}
        if root.exists()
        else set()
    )


def _garbage(store: Store) -> set[str]:
    with store.read() as conn:
        return set(conn.execute(select(schema.garbage_files.c.location)).scalars())


# --- retention ----------------------------------------------------------------------------------


def test_retention_by_time_deletes_only_expired_segments(store: Store) -> None:
    admin = TopicAdmin(store)
    topic = admin.create("t", partitions=2, retention=HOUR)
    producer = Producer(store, "t")
    producer.send_batch([Message(b"a0"), Message(b"a1"), Message(b"a2")], partition=0)
    producer.send_batch([Message(BIG)], partition=0)  # a file segment
    producer.send_batch([Message(b"c0"), Message(b"c1")], partition=0)
    producer.send_batch([Message(b"other")], partition=1)
    before = _read(store, topic)
    [big_file] = [r.location for r in _segment_rows(store, topic) if r.location]
    newest = before[-1].publish_time

    # Nothing has expired yet.
    assert maintenance.apply_retention(store, topic) == maintenance.MaintenanceReport()

    # An hour after the last append, everything older than it has expired.
    report = maintenance.apply_retention(store, topic, now=newest + HOUR)
    assert (report.segments_deleted, report.messages_expired) == (2, 4)
    stats = admin.stats("t")
    assert [(s.start_offset, s.end_offset, s.segments) for s in stats] == [(4, 6, 1), (0, 1, 1)]
    assert [(m.offset, m.value) for m in _read(store, topic)] == [(4, b"c0"), (5, b"c1")]
    assert _fields(_read(store, topic)) == _fields(before[4:])
    assert [m.offset for m in _read(store, topic, start=1)] == [4, 5]
    assert [m.message_id for m in Consumer(store, "t", initial_position="earliest").receive()] == [
        "0:4",
        "0:5",
        "1:0",
    ]
    clamped = Consumer(store, "t", initial_position="latest", start_offsets={0: 2})
    assert [m.offset for m in clamped.receive()] == [4, 5]
    # Appends continue after the end, not after the start.
    assert producer.send(b"d", partition=0) == "0:6"

    # The file is retired, still readable by whoever had looked it up.
    assert store.path(big_file).is_file()
    assert _garbage(store) == {big_file}
    assert garbage.collect(store) == 0
    assert garbage.collect(store, now=utc_now() + garbage.DEFAULT_GRACE + timedelta(seconds=1)) == 1
    assert not store.path(big_file).exists()
    assert _garbage(store) == set()


def test_retention_by_time_stops_at_the_first_unexpired_segment(store: Store) -> None:
    topic = TopicAdmin(store).create("t", retention=HOUR)
    producer = Producer(store, "t")
    for i in range(4):
        producer.send(f"m{i}".encode())
    times = [m.publish_time for m in _read(store, topic)]
    report = maintenance.apply_retention(store, topic, now=times[2] + HOUR)
    assert report.messages_expired == 2  # m0 and m1 are older than now - 1h; m2 is not
    assert [m.value for m in _read(store, topic)] == [b"m2", b"m3"]
    report = maintenance.apply_retention(store, topic, now=times[3] + HOUR + timedelta(seconds=1))
    assert report.messages_expired == 2
    assert TopicAdmin(store).stats("t")[0].messages == 0
    assert producer.send(b"again") == "0:4"
    assert [m.offset for m in _read(store, topic)] == [4]


def test_topic_without_retention_keeps_everything(store: Store) -> None:
    topic = TopicAdmin(store).create("t", partitions=2)
    Producer(store, "t").send_batch([Message(BIG), Message(b"x")])
    report = maintenance.apply_retention(
        store, topic, now=utc_now() + FAR_FUTURE, grace=timedelta(0)
    )
    assert report == maintenance.MaintenanceReport()
    assert [s.messages for s in TopicAdmin(store).stats("t")] == [1, 1]


def test_retention_by_size_deletes_oldest_and_keeps_the_newest(store: Store) -> None:
    admin = TopicAdmin(store)
    topic = admin.create("t", partitions=2, retention_bytes=10**9)
    producer = Producer(store, "t")
    for i in range(4):
        producer.send_batch(
            [Message(f"p0-{i}-{j}".encode() * (i + 1)) for j in range(5)], partition=0
        )
    producer.send_batch([Message(BIG)], partition=1)
    sizes = [r.size_bytes for r in _segment_rows(store, topic)]

    # Under the limit: nothing happens.
    assert maintenance.apply_retention(store, topic).segments_deleted == 0

    # A limit exactly the size of the two newest segments keeps those two.
    topic = admin.set_retention("t", retention=None, retention_bytes=sizes[2] + sizes[3])
    report = maintenance.apply_retention(store, topic)
    assert (report.segments_deleted, report.messages_expired) == (2, 10)
    stats = admin.stats("t")
    assert (stats[0].start_offset, stats[0].end_offset, stats[0].size_bytes) == (
        10,
        20,
        sizes[2] + sizes[3],
    )

    # A limit below any one segment still keeps the newest segment of each partition.
    topic = admin.set_retention("t", retention=None, retention_bytes=1)
    report = maintenance.apply_retention(store, topic)
    assert (report.segments_deleted, report.messages_expired) == (1, 5)
    stats = admin.stats("t")
    assert [(s.start_offset, s.end_offset, s.segments) for s in stats] == [(15, 20, 1), (0, 1, 1)]
    assert [m.value for m in _read(store, topic)] == [f"p0-3-{j}".encode() * 4 for j in range(5)]
    assert _read(store, topic, partition=1)[0].value == BIG


def test_retention_by_time_and_size_together(store: Store) -> None:
    topic = TopicAdmin(store).create("t", retention=HOUR, retention_bytes=10**9)
    producer = Producer(store, "t")
    for i in range(3):
        producer.send(f"m{i}".encode())
    first = _read(store, topic)[0].publish_time
    report = maintenance.apply_retention(store, topic, now=first + HOUR + timedelta(microseconds=1))
    assert report.messages_expired == 1  # by time only; the size limit is far away


# --- compaction -----------------------------------------------------------------------------------


def test_compaction_merges_small_runs_and_preserves_everything(store: Store) -> None:
    admin = TopicAdmin(store)
    topic = admin.create("t", partitions=2)
    producer = Producer(store, "t", name="p")
    seq = 0
    for i in range(30):
        batch = []
        for j in range(i % 4 + 1):
            seq += 1
            batch.append(
                Message(
                    f"v{i}.{j}".encode() * 20,
                    key=f"k{j}",
                    properties={"i": str(i)},
                    event_time=utc_now() - timedelta(minutes=i),
                    sequence_id=seq,
                )
            )
        producer.send_batch(batch, partition=0)
        if i == 14:
            producer.send_batch([Message(BIG, sequence_id=seq + 1000)], partition=0)
            seq += 1000
    producer.send(b"alone", partition=1)
    before = [_read(store, topic, p) for p in range(2)]
    rows = _segment_rows(store, topic)
    assert len(rows) == 31
    stats_before = admin.stats("t")

    # The big segment is not small, so it splits the small ones into two stretches;
    # the target size splits those further into runs.
    small_bytes = segments.INLINE_LIMIT
    target = 5 * max(r.size_bytes for r in rows if r.size_bytes < small_bytes)
    report = maintenance.compact(store, topic, small_bytes=small_bytes, target_bytes=target)
    after_rows = _segment_rows(store, topic)

    assert [_fields(_read(store, topic, p)) for p in range(2)] == [_fields(b) for b in before]
    assert [(s.start_offset, s.end_offset) for s in admin.stats("t")] == [
        (s.start_offset, s.end_offset) for s in stats_before
    ]
    assert report.segments_merged == 30
    assert report.segments_written == len(after_rows) - 1
    assert 2 < len(after_rows) < 31
    # Segments still tile the partition: contiguous, no overlap.
    offset = 0
    for row in after_rows:
        assert row.base_offset == offset
        offset += row.count
    assert offset == stats_before[0].end_offset
    assert all(r.size_bytes <= target for r in after_rows if r.size_bytes < small_bytes)
    assert len(_segment_rows(store, topic, 1)) == 1  # a single segment is left alone

    # A second pass finds nothing more to merge; appends and de-duplication carry on.
    assert maintenance.compact(store, topic, small_bytes=small_bytes, target_bytes=target) == (
        maintenance.MaintenanceReport()
    )
    assert producer.send(b"dup", sequence_id=1, partition=0) is None
    assert producer.send(b"next", sequence_id=seq + 1, partition=0) == f"0:{offset}"


def test_compaction_writes_big_merges_to_files_and_retires_the_old_ones(store: Store) -> None:
    topic = TopicAdmin(store).create("t")
    producer = Producer(store, "t")
    chunk = b"c" * (segments.INLINE_LIMIT // 3)
    for i in range(4):
        producer.send_batch([Message(chunk + bytes([i]))])  # inline
    for i in range(3):
        producer.send_batch([Message(BIG + bytes([i]))])  # files
    before = _read(store, topic)
    old_files = {r.location for r in _segment_rows(store, topic) if r.location}
    assert len(old_files) == 3 and old_files == _segment_files(store)

    report = maintenance.compact(store, topic)
    assert (report.segments_merged, report.segments_written) == (7, 1)
    [row] = _segment_rows(store, topic)
    assert row.location is not None and row.location not in old_files
    assert (row.base_offset, row.count) == (0, 7)
    assert _fields(_read(store, topic)) == _fields(before)
    # Old files stay until their grace period is over.
    assert _garbage(store) == old_files
    assert _segment_files(store) == old_files | {row.location}
    assert garbage.collect(store, now=utc_now() + garbage.DEFAULT_GRACE + timedelta(seconds=1)) == 3
    assert _segment_files(store) == {row.location}
    assert _fields(_read(store, topic)) == _fields(before)


def test_small_merges_stay_inline(store: Store) -> None:
    topic = TopicAdmin(store).create("t")
    producer = Producer(store, "t")
    for i in range(10):
        producer.send(f"m{i}".encode())
    maintenance.compact(store, topic)
    [row] = _segment_rows(store, topic)
    assert (row.location, row.count) == (None, 10)
    assert _segment_files(store) == set()
    assert [m.value for m in _read(store, topic)] == [f"m{i}".encode() for i in range(10)]


def test_compaction_yields_to_a_concurrent_retention(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention deletes the run between compaction's read and its swap: compaction gives up."""
    topic = TopicAdmin(store).create("t", retention=HOUR)
    producer = Producer(store, "t")
    for i in range(3):
        producer.send_batch([Message(BIG + bytes([i]))])
    files_before = _segment_files(store)
    real_swap = maintenance._swap
    newest = _read(store, topic)[-1].publish_time

    def swap_after_retention(*args, **kwargs):  # type: ignore[no-untyped-def]
        maintenance.apply_retention(store, topic, now=newest + HOUR + timedelta(seconds=1))
        return real_swap(*args, **kwargs)

    monkeypatch.setattr(maintenance, "_swap", swap_after_retention)
    report = maintenance.compact(store, topic)
    assert report == maintenance.MaintenanceReport()
    assert _segment_rows(store, topic) == []
    # The merged file compaction staged was removed, not left behind.
    assert _segment_files(store) == files_before


# --- garbage and the whole pass ------------------------------------------------------------------


def test_collect_deletes_only_files_whose_grace_is_over(store: Store) -> None:
    now = utc_now()
    for name in ("soon", "later"):
        segments.write_file(store.data_dir, f"segments/x/0/{name}.arrow", b"data")
    with store.write() as conn:
        garbage.retire_locations(conn, ["segments/x/0/soon.arrow"], timedelta(seconds=10))
        garbage.retire_locations(conn, ["segments/x/0/later.arrow"], timedelta(hours=1))
        garbage.retire_locations(conn, ["segments/x/0/already-gone.arrow"], timedelta(0))
    assert garbage.collect(store, now=now) == 0
    assert garbage.collect(store, now=now + timedelta(minutes=1)) == 2
    assert _segment_files(store) == {"segments/x/0/later.arrow"}
    assert _garbage(store) == {"segments/x/0/later.arrow"}
    assert garbage.collect(store, now=now + timedelta(hours=2)) == 1
    assert _segment_files(store) == set()


def test_run_maintenance_covers_every_topic(store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("kept", partitions=2)
    admin.create("tiny", retention_bytes=1)
    for name in ("kept", "tiny"):
        producer = Producer(store, name)
        for i in range(3):
            producer.send_batch([Message(BIG + bytes([i]))], partition=0)
    report = maintenance.run_maintenance(store, grace=timedelta(0))
    # tiny: 2 of 3 segments over the size limit; kept: its 3 files merged into one.
    assert (report.segments_deleted, report.messages_expired) == (2, 2)
    assert (report.segments_merged, report.segments_written) == (3, 1)
    assert [s.segments for s in admin.stats("kept")] == [1, 0]
    assert [(s.start_offset, s.end_offset) for s in admin.stats("tiny")] == [(2, 3)]
    # With no grace the replaced files are gone at once; the live ones remain.
    live = {r.location for t in admin.list() for r in _segment_rows(store, t) if r.location}
    assert _segment_files(store) == live
    assert _garbage(store) == set()
    assert [m.value for m in _read(store, admin.get("kept"))] == [
        BIG + bytes([i]) for i in range(3)
    ]


# --- readers racing maintenance --------------------------------------------------------------


def test_a_long_read_survives_repeated_compaction_with_no_grace(store: Store) -> None:
    """A read_range in progress loses its next file to compaction+GC again and again."""
    topic = TopicAdmin(store).create("t")
    producer = Producer(store, "t")
    piece = b"p" * (segments.INLINE_LIMIT + 10)  # each append is a file of ~65 KiB
    target = 4 * len(piece)  # three appends merge; a merged run and one more do not
    reader = read_range(store, topic, 0, 0)
    seen: list[int] = []
    for cycle in range(8):
        for j in range(3):
            producer.send(piece + f"{cycle}.{j}".encode())
        # The reader looks the three new segments up and reads the first.
        seen.extend(m.offset for m in messages_from_table(next(reader)))
        # Compaction replaces them; with no grace their files are deleted at once.
        report = maintenance.compact(store, topic, target_bytes=target, grace=timedelta(0))
        assert report.segments_merged == 3
        assert garbage.collect(store) == 3
        # The reader's next file is gone: it must look the range up again.
        seen.extend(m.offset for m in messages_from_table(next(reader)))
    assert next(reader, None) is None
    assert seen == list(range(24))


def test_a_read_in_progress_skips_segments_expired_meanwhile(store: Store) -> None:
    topic = TopicAdmin(store).create("t", retention=HOUR)
    producer = Producer(store, "t")
    for i in range(4):
        producer.send(BIG + bytes([i]))
    time.sleep(0.002)
    cutoff = utc_now()
    for i in range(4, 6):
        producer.send(BIG + bytes([i]))
    reader = read_range(store, topic, 0, 0)
    first = messages_from_table(next(reader))
    assert [m.offset for m in first] == [0]
    maintenance.apply_retention(store, topic, now=cutoff + HOUR, grace=timedelta(0))
    garbage.collect(store)
    rest = [m.offset for b in reader for m in messages_from_table(b)]
    assert rest == [4, 5]  # 1..3 expired under the reader; nothing unexpired is lost


def _maintain(url: str, data_dir: str, cutoff: str, stop: Any, passes: Any, out: str) -> None:
    """Child process: retention (with ``now = cutoff + 1h``), compaction and GC, no grace."""
    counts = {"merged": 0, "expired": 0, "collected": 0}
    try:
        store = Store.open(url, data_dir)
        now = datetime.fromisoformat(cutoff) + HOUR
        while not stop.is_set():
            info = TopicAdmin(store).get("live")
            r = maintenance.apply_retention(store, info, now=now, grace=timedelta(0))
            c = maintenance.compact(
                store, info, small_bytes=600_000, target_bytes=1_000_000, grace=timedelta(0)
            )
            counts["collected"] += garbage.collect(store)
            counts["merged"] += c.segments_merged
            counts["expired"] += r.messages_expired
            with passes.get_lock():
                passes.value += 1
        store.close()
        Path(out).write_text(json.dumps(counts))
    except BaseException:
        Path(out).write_text(json.dumps({"error": traceback.format_exc()}))
        raise


def test_readers_lose_nothing_unexpired_while_maintenance_runs(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    """Readers race a producer and a maintenance process (retention, compaction, GC; no grace).

    Old messages are published before ``cutoff`` and expire; new ones are
    published while maintenance runs and must all be read, in order, by a
    consumer (``Consumer.receive``) and by every full scan (``read_range``) of
    a deliberately slow reader, whose looked-up files vanish under it.
    """
    partitions = 2
    topic = TopicAdmin(store).create("live", partitions=partitions, retention=HOUR)
    setup = Producer(store, "live")
    for i in range(12):  # small inline and big file segments
        value = BIG if i % 4 == 0 else f"old{i}".encode() * 50
        setup.send_batch([Message(value + f"|old-{i}-{j}".encode()) for j in range(3)])
    first_new = {p: end for p, (_, end) in end_offsets(store, topic).items()}
    expected: dict[tuple[int, int], bytes] = {
        (m.partition, m.offset): m.value  # type: ignore[misc]
        for m in Consumer(store, "live", initial_position="earliest").receive(10**6)
    }
    time.sleep(0.002)
    cutoff = utc_now()  # what was published before this has expired for retention

    stop = threading.Event()
    producing = threading.Event()
    producing.set()
    errors: list[BaseException] = []
    # Each scan: the partitions' ends when it began, and what it read.
    scans: list[tuple[dict[int, int], dict[int, list[tuple[int, bytes]]]]] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                stop.set()

        return run

    @guarded
    def produce() -> None:
        own = Store.open(store_url, store.data_dir)
        producer = Producer(own, "live")
        try:
            for i in range(100):
                if stop.is_set():
                    return
                size, value = (1, BIG) if i % 5 == 0 else (4, b"n" * 300)
                batch = [Message(value + f"|new-{i}-{j}".encode()) for j in range(size)]
                for message, message_id in zip(batch, producer.send_batch(batch), strict=True):
                    part, offset = map(int, message_id.split(":"))  # type: ignore[union-attr]
                    expected[(part, offset)] = message.value  # type: ignore[assignment]
        finally:
            own.close()
            producing.clear()

    @guarded
    def scan() -> None:
        own = Store.open(store_url, store.data_dir)
        try:
            while not stop.is_set():
                ends_before = {p: end for p, (_, end) in end_offsets(own, topic).items()}
                seen: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
                for p in range(partitions):
                    for batch in read_range(own, topic, p, 0):
                        for m in messages_from_table(batch):
                            seen[p].append((m.offset, m.value))  # type: ignore[arg-type]
                        # Slow on purpose: segments it looked up get compacted and
                        # collected before it opens them, so it must look them up again.
                        time.sleep(0.002)
                scans.append((ends_before, seen))
        finally:
            own.close()

    ctx = multiprocessing.get_context("spawn")
    stop_maintenance = ctx.Event()
    passes = ctx.Value("i", 0)
    report = tmp_path / "maintenance.json"
    maintainer = ctx.Process(
        target=_maintain,
        args=(
            store_url,
            str(store.data_dir),
            cutoff.isoformat(),
            stop_maintenance,
            passes,
            str(report),
        ),
    )
    maintainer.start()
    threads = [threading.Thread(target=f, daemon=True) for f in (produce, scan)]
    consumed: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    reader_store = Store.open(store_url, store.data_dir)
    try:
        _wait_for(lambda: passes.value >= 1 or not maintainer.is_alive(), "maintenance", 60)
        for thread in threads:
            thread.start()
        consumer = Consumer(reader_store, "live", initial_position="earliest")

        def caught_up() -> bool:
            """Consume one batch; true once the producer finished and every end is read."""
            if stop.is_set():
                return True
            got = consumer.receive(max_messages=25)
            for m in got:
                consumed[m.partition].append((m.offset, m.value))  # type: ignore[arg-type]
            if got or producing.is_set():
                return False
            ends = end_offsets(reader_store, topic)
            return all(consumer.positions[p] >= ends[p][1] for p in range(partitions))

        until(caught_up, "the consumer to catch up with the finished producer", 60, every=0)
        # Two more maintenance passes and two more full scans over the final state.
        scans_then, passes_then = len(scans), passes.value
        _wait_for(
            lambda: (
                stop.is_set() or (len(scans) >= scans_then + 2 and passes.value >= passes_then + 2)
            ),
            "two more scans and maintenance passes after the producer finished",
            60,
        )
    finally:
        stop.set()
        stop_maintenance.set()
        for thread in threads:
            thread.join(30)
        maintainer.join(30)
        if maintainer.is_alive():
            maintainer.kill()
            maintainer.join(10)
        reader_store.close()
    assert not any(t.is_alive() for t in threads), "a reader or producer thread did not stop"
    if errors:
        raise errors[0]
    counts = json.loads(report.read_text())
    assert "error" not in counts, counts["error"]
    assert maintainer.exitcode == 0

    assert counts["expired"] > 0, f"retention never expired anything: {counts}"
    assert counts["merged"] > 0, f"compaction never merged anything: {counts}"
    assert counts["collected"] > 0, f"no file was ever garbage collected: {counts}"
    ends = end_offsets(store, topic)
    for p in range(partitions):
        assert ends[p][0] > 0, f"partition {p}: nothing expired"
        assert ends[p][1] - first_new[p] >= 100  # 100 appends of 1 or 4, over 2 partitions
        _check_no_gap(consumed[p], first_new[p], ends[p][1], expected, p, "consumer")
        for ends_before, seen in scans:
            _check_no_gap(seen[p], first_new[p], ends_before[p], expected, p, "scan", at_least=True)
    print(f"maintenance {counts}, {passes.value} passes, {len(scans)} scans")


def _check_no_gap(
    seen: list[tuple[int, bytes]],
    first_new: int,
    end: int,
    expected: dict[tuple[int, int], bytes],
    partition: int,
    who: str,
    *,
    at_least: bool = False,
) -> None:
    """In order, correct, and every unexpired offset below ``end`` present.

    Gaps are allowed only among expired (old) offsets. With ``at_least`` the
    reader may also have read past ``end`` (messages appended meanwhile).
    """
    offsets = [o for o, _ in seen]
    assert offsets == sorted(set(offsets)), f"{who} p{partition}: out of order or repeated"
    for offset, value in seen:
        assert value == expected[(partition, offset)], (
            f"{who} p{partition}: wrong value at {offset}"
        )
    new = [o for o in offsets if o >= first_new]
    last = max(end, first_new + len(new)) if at_least else end
    assert new == list(range(first_new, last)), (
        f"{who} p{partition}: unexpired messages lost: read {len(new)} of {first_new}..{last - 1}"
    )


def test_retention_keeps_what_a_subscription_has_not_read(store: Store) -> None:
    """As in Pulsar, retention covers acknowledged messages: a backlog is never expired."""
    topic = TopicAdmin(store).create("t", retention=HOUR)
    producer = Producer(store, "t")
    for i in range(4):
        producer.send(f"m{i}".encode())  # one segment each
    consumer = Consumer(store, "t", subscription="audit", initial_position="earliest")
    assert [m.value for m in consumer.receive(max_messages=2)] == [b"m0", b"m1"]
    consumer.acknowledge()
    later = utc_now() + FAR_FUTURE  # every message is past the time limit
    report = maintenance.apply_retention(store, topic, now=later)
    assert report.messages_expired == 2  # m0 and m1 were read; m2 and m3 were not
    assert [m.value for m in consumer.receive()] == [b"m2", b"m3"]
    consumer.acknowledge()
    assert maintenance.apply_retention(store, topic, now=later).messages_expired == 2
    assert TopicAdmin(store).stats("t")[0].messages == 0


def test_a_staged_file_collected_before_its_commit_fails_the_commit(store: Store) -> None:
    """A batch longer than the orphan grace must not commit a row whose file is gone."""
    from sparkfn.api.errors import StoreError
    from sparkfn.topics.log import commit_segments, stage

    topic = TopicAdmin(store).create("t")
    old = time.time() - 2 * garbage.ORPHAN_GRACE.total_seconds()

    lost = stage(store, topic, 0, stored_table([BIG] * 50))
    assert lost.location is not None
    os.utime(store.path(lost.location), (old, old))  # staged long ago, never committed yet
    assert garbage.collect_orphans(store) == 1
    with pytest.raises(StoreError, match=r"staged segment file .* is gone before its commit"):
        with store.write() as conn:
            commit_segments(store, conn, topic, [lost], "c1")
    assert TopicAdmin(store).stats("t")[0].messages == 0  # no row points at a missing file

    kept = stage(store, topic, 0, stored_table([BIG] * 50))
    assert kept.location is not None
    os.utime(store.path(kept.location), (old, old))
    with store.write() as conn:  # the commit makes it young again, then references it
        commit_segments(store, conn, topic, [kept], "c2")
    assert store.path(kept.location).stat().st_mtime > old
    assert garbage.collect_orphans(store) == 0
    assert [m.value for m in _read(store, topic)] == [BIG] * 50


def test_an_orphan_touched_by_a_commit_at_the_last_moment_is_put_back(tmp_path: Path) -> None:
    """The collector renames a candidate aside, then checks it: one a commit
    touched just before the rename is being committed and goes back."""
    cutoff = time.time() - garbage.ORPHAN_GRACE.total_seconds()
    old = cutoff - 10
    kept = tmp_path / "a.arrow"
    kept.write_bytes(b"x")  # young: touched by a commit after the collector listed it
    assert not garbage.delete_orphan(kept, kept, cutoff)
    assert kept.read_bytes() == b"x"
    assert list(tmp_path.iterdir()) == [kept]

    gone = tmp_path / "b.arrow"
    gone.write_bytes(b"y")
    os.utime(gone, (old, old))
    assert garbage.delete_orphan(gone, gone, cutoff)
    assert list(tmp_path.iterdir()) == [kept]


def test_a_file_left_renamed_aside_is_restored_if_referenced_else_deleted(store: Store) -> None:
    """A collector that died between renaming a file aside and deleting it."""
    from sparkfn.topics.log import stage

    topic = TopicAdmin(store).create("t")
    path = _committed_file(store, topic, 20)
    aside = garbage.aside(path)
    os.rename(path, aside)  # the commit touched it just before a collector's rename
    orphan = stage(store, topic, 0, stored_table([BIG] * 5))
    assert orphan.location is not None
    orphan_path = store.path(orphan.location)
    old = time.time() - 2 * garbage.ORPHAN_GRACE.total_seconds()
    os.utime(orphan_path, (old, old))
    orphan_aside = garbage.aside(orphan_path)
    os.rename(orphan_path, orphan_aside)

    assert garbage.collect_orphans(store) == 1  # the unreferenced old one
    assert path.exists() and not aside.exists()
    assert not orphan_aside.exists() and not orphan_path.exists()
    assert [m.value for m in _read(store, topic)] == [BIG] * 20


def test_a_reader_puts_back_a_committed_file_the_collector_had_aside(store: Store) -> None:
    """A collector that died between its rename and its check left a committed file aside."""
    topic = TopicAdmin(store).create("t")
    path = _committed_file(store, topic, 3)
    os.rename(path, garbage.aside(path))
    assert [m.value for m in _read(store, topic)] == [BIG] * 3
    assert path.exists()
    assert not garbage.delete_orphan(path, garbage.aside(path), time.time())  # already back


def _committed_file(store: Store, topic: TopicInfo, count: int) -> Path:
    """The file of a committed segment of ``count`` big messages."""
    from sparkfn.topics.log import commit_segments, stage

    seg = stage(store, topic, 0, stored_table([BIG] * count))
    assert seg.location is not None
    with store.write() as conn:
        commit_segments(store, conn, topic, [seg], f"c-{count}")
    return store.path(seg.location)
