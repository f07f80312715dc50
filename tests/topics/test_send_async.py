"""``Producer.send_async``: client-side batching, futures, flush, close, failures, threads.

Every behaviour is asserted on what the store holds (segments, offsets,
values) and on the futures, on both backends; no assertion is about time.
A "never by delay" producer has a publish delay of an hour, so that only
its count or a flush can seal a batch.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from concurrent.futures import Future, as_completed, wait
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text

from sparkfn.api.errors import (
    ConfigError,
    PayloadError,
    ProducerClosedError,
    TopicNotFoundError,
)
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage
from sparkfn.topics.producer import Producer

WAIT = 60.0  # seconds any single future may take; only a hang reaches it
HOUR = timedelta(hours=1)


def _create(
    store: Store, name: str = "t", partitions: int = 1, schema_type: str = "bytes"
) -> TopicInfo:
    return TopicAdmin(store).create(name, partitions=partitions, schema_type=schema_type)


def _read_all(store: Store, name: str = "t") -> list[ReceivedMessage]:
    return Consumer(store, name, initial_position="earliest").receive(max_messages=1_000_000)


def _segments(store: Store, info: TopicInfo) -> list[tuple[int, int, int]]:
    """``(partition, base offset, count)`` of every segment of the topic, in offset order."""
    seg = schema.segments
    with store.read() as conn:
        rows = conn.execute(
            select(seg.c.partition, seg.c.base_offset, seg.c.count)
            .where(seg.c.topic_id == info.id)
            .order_by(seg.c.partition, seg.c.base_offset)
        ).all()
    return [(r.partition, r.base_offset, r.count) for r in rows]


def _results(futures: list[Future[str | None]]) -> list[str | None]:
    return [f.result(timeout=WAIT) for f in futures]


def _flusher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("producer ")]


# --- ids, order, batching -------------------------------------------------------------------


def test_futures_resolve_to_ids_in_send_order(store: Store) -> None:
    _create(store)
    with Producer(store, "t") as producer:
        futures = [producer.send_async(f"m{i}".encode()) for i in range(25)]
        producer.flush()
        assert all(f.done() for f in futures)
    assert _results(futures) == [f"0:{i}" for i in range(25)]
    assert [m.value for m in _read_all(store)] == [f"m{i}".encode() for i in range(25)]


def test_every_field_round_trips(store: Store) -> None:
    _create(store, "acme/ns/t", partitions=2)
    event_time = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    with Producer(store, "acme/ns/t", name="p") as producer:
        future = producer.send_async(
            b"\x00raw",
            key="k",
            properties={"a": "1", "b": ""},
            event_time=event_time,
            sequence_id=7,
            partition=1,
        )
    assert future.result(timeout=WAIT) == "1:0"
    [got] = _read_all(store, "acme/ns/t")
    assert (got.topic, got.partition, got.offset) == ("acme/ns/t", 1, 0)
    assert (got.key, got.value, got.properties) == ("k", b"\x00raw", {"a": "1", "b": ""})
    assert (got.event_time, got.producer, got.sequence_id) == (event_time, "p", 7)


def test_a_full_batch_is_appended_without_a_flush(store: Store) -> None:
    info = _create(store)
    producer = Producer(store, "t", batching_max_messages=4, batching_max_publish_delay=HOUR)
    futures = [producer.send_async(b"x") for _ in range(10)]
    assert _results(futures[:8]) == [f"0:{i}" for i in range(8)]
    # Two full batches: appended as two segments of 4, or as one of 8 if the
    # second was sealed before the first was appended (one append takes all
    # that wait); never a part of a batch.
    appended = _segments(store, info)
    assert appended in ([(0, 0, 4), (0, 4, 4)], [(0, 0, 8)])
    assert not futures[8].done() and not futures[9].done()  # the open batch waits
    producer.close()
    assert _results(futures[8:]) == ["0:8", "0:9"]
    assert _segments(store, info) == [*appended, (0, 8, 2)]


def test_a_batch_is_appended_after_the_publish_delay(store: Store) -> None:
    info = _create(store)
    producer = Producer(store, "t", batching_max_publish_delay=0.05)
    futures = [producer.send_async(f"{i}".encode()) for i in range(3)]
    # No flush and far fewer than batching_max_messages: only the delay seals it.
    assert _results(futures) == ["0:0", "0:1", "0:2"]
    assert _segments(store, info) == [(0, 0, 3)]
    producer.close()


def test_a_batch_spans_partitions_in_one_append_with_per_partition_order(store: Store) -> None:
    info = _create(store, partitions=3)
    with Producer(store, "t", batching_max_publish_delay=HOUR) as producer:
        futures = [producer.send_async(f"{i}".encode()) for i in range(9)]  # round robin
    assert _results(futures) == [f"{i % 3}:{i // 3}" for i in range(9)]
    assert _segments(store, info) == [(0, 0, 3), (1, 0, 3), (2, 0, 3)]
    seg = schema.segments
    with store.read() as conn:
        commits = conn.execute(select(seg.c.commit_id).where(seg.c.topic_id == info.id)).all()
    assert len({c.commit_id for c in commits}) == 1


def test_keys_route_as_send_does(store: Store) -> None:
    _create(store, partitions=4)
    with Producer(store, "t") as producer:
        futures = [producer.send_async(b"v", key=f"k{i}") for i in range(20)]
    expected = {m.key: m.partition for m in _read_all(store)}
    for i, future in enumerate(futures):
        assert (future.result(timeout=WAIT) or "").split(":")[0] == str(expected[f"k{i}"])
    # The same keys through send land on the same partitions.
    sync = Producer(store, "t")
    for i in range(20):
        assert (sync.send(b"v", key=f"k{i}") or "").split(":")[0] == str(expected[f"k{i}"])


def test_send_and_send_batch_wait_for_what_send_async_buffered(store: Store) -> None:
    _create(store)
    with Producer(store, "t", batching_max_publish_delay=HOUR) as producer:
        first = producer.send_async(b"async 1")
        assert producer.send(b"sync") == "0:1"
        assert first.result(timeout=WAIT) == "0:0"
        second = producer.send_async(b"async 2")
        assert producer.send_batch([Message(b"batch")]) == ["0:3"]
        assert second.result(timeout=WAIT) == "0:2"
    assert [m.value for m in _read_all(store)] == [b"async 1", b"sync", b"async 2", b"batch"]


def test_max_pending_messages_makes_send_async_wait_not_fail(store: Store) -> None:
    _create(store)
    with Producer(
        store, "t", batching_max_messages=2, max_pending_messages=3, batching_max_publish_delay=HOUR
    ) as producer:
        futures = [producer.send_async(f"{i}".encode()) for i in range(50)]
    assert _results(futures) == [f"0:{i}" for i in range(50)]


def test_the_delay_may_be_a_timedelta_or_seconds(store: Store) -> None:
    _create(store)
    for delay in (timedelta(milliseconds=20), 0.02, 0):
        with Producer(store, "t", batching_max_publish_delay=delay) as producer:
            assert producer.send_async(b"x").result(timeout=WAIT) is not None


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("batching_max_messages", 0),
        ("batching_max_publish_delay", -1.0),
        ("max_pending_messages", -1),
    ],
)
def test_bad_batching_options_are_rejected(store: Store, option: str, value: float) -> None:
    _create(store)
    with pytest.raises(ConfigError, match=option):
        Producer(store, "t", **{option: value})  # type: ignore[arg-type]


# --- flush and durability ---------------------------------------------------------------------


def test_flush_makes_everything_durable_for_another_store(store: Store, store_url: str) -> None:
    _create(store, partitions=2)
    producer = Producer(store, "t", batching_max_messages=7, batching_max_publish_delay=HOUR)
    futures = [producer.send_async(f"{i}".encode(), key=f"k{i % 5}") for i in range(100)]
    producer.flush()
    assert all(f.done() for f in futures)
    other = Store.open(store_url, store.data_dir)  # as if another process
    try:
        got = _read_all(other)
    finally:
        other.close()
    assert sorted(m.value or b"" for m in got) == sorted(f"{i}".encode() for i in range(100))
    assert {m.message_id for m in got} == set(_results(futures))
    producer.close()


def test_flush_and_close_without_async_sends_do_nothing(store: Store) -> None:
    _create(store)
    producer = Producer(store, "t")
    producer.flush()
    producer.close()
    producer.close()  # idempotent


# --- failures are never silent, and final -------------------------------------------------------


def _break_appends(store: Store) -> None:
    """Make every later append fail, as a broken store would: the segments table is gone.

    Renaming a table stops writes for any user, root included (a read-only
    file would not stop root).
    """
    with store.write() as conn:
        conn.execute(text("ALTER TABLE segments RENAME TO segments_away"))


def _repair_appends(store: Store) -> None:
    with store.write() as conn:
        conn.execute(text("ALTER TABLE segments_away RENAME TO segments"))


@pytest.mark.parametrize("name", [None, "named"])
def test_a_failed_append_fails_every_future_of_the_batch_and_every_flush(
    store: Store, name: str | None
) -> None:
    _create(store, partitions=2)
    producer = Producer(store, "t", name=name, batching_max_publish_delay=HOUR)
    futures = [producer.send_async(b"x", sequence_id=i) for i in range(6)]
    TopicAdmin(store).delete("t")  # underneath the producer
    with pytest.raises(ProducerClosedError, match="to topic public/default/t failed") as raised:
        producer.flush()
    assert "6 message(s) sent with it were not appended" in str(raised.value)
    assert "the first failure: TopicNotFoundError" in str(raised.value)
    cause = raised.value.__cause__
    assert isinstance(cause, TopicNotFoundError) and "was deleted" in str(cause)
    for future in futures:
        error = future.exception(timeout=WAIT)
        assert error is cause  # each future carries the append's own error
        assert "an append of 6 message(s) failed" in "\n".join(error.__notes__)
    # The failure is final: every later call says so, again and again.
    with pytest.raises(ProducerClosedError) as again:
        producer.flush()
    assert again.value is not raised.value and again.value.__cause__ is cause
    for send in (
        lambda: producer.send_async(b"y"),
        lambda: producer.send(b"y"),
        lambda: producer.send_batch([Message(b"y")]),
    ):
        with pytest.raises(ProducerClosedError, match="sends nothing more") as refused:
            send()
        assert refused.value.__cause__ is cause
    with pytest.raises(ProducerClosedError):
        producer.close()
    with pytest.raises(ProducerClosedError):
        producer.close()
    thread = producer._batcher.thread
    assert thread is not None and not thread.is_alive()


def test_a_failure_of_one_batch_leaves_the_earlier_ones_appended(store: Store) -> None:
    _create(store)
    producer = Producer(store, "t", batching_max_messages=2, batching_max_publish_delay=HOUR)
    ok = [producer.send_async(b"a"), producer.send_async(b"b")]  # a full batch: appended
    assert _results(ok) == ["0:0", "0:1"]
    pending = producer.send_async(b"c")
    TopicAdmin(store).delete("t")
    with pytest.raises(ProducerClosedError) as raised:
        producer.close()
    assert isinstance(raised.value.__cause__, TopicNotFoundError)
    assert pending.exception(timeout=WAIT) is raised.value.__cause__
    assert _results(ok) == ["0:0", "0:1"]


def test_every_thread_sharing_a_producer_is_told_its_messages_failed(store: Store) -> None:
    _create(store)
    producer = Producer(store, "t", batching_max_publish_delay=HOUR)
    before = producer.send_async(b"before")
    producer.flush()
    _break_appends(store)  # the store fails from now on, mid-run
    sent = threading.Barrier(2)
    first_flushed = threading.Event()
    futures: dict[int, list[Future[str | None]]] = {}
    raised: dict[int, BaseException | None] = {}

    def send_then_flush(thread: int) -> None:
        futures[thread] = [producer.send_async(f"{thread}:{i}".encode()) for i in range(5)]
        sent.wait(timeout=WAIT)  # both threads' messages are in the one open batch
        if thread == 1:  # flushes only once thread 0's flush was told of the failure
            assert first_flushed.wait(timeout=WAIT)
        try:
            producer.flush()
            raised[thread] = None
        except Exception as exc:  # the outcome is what is asserted
            raised[thread] = exc
        finally:
            first_flushed.set()

    threads = [threading.Thread(target=send_then_flush, args=(t,)) for t in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT)
        assert not thread.is_alive()

    assert before.result(timeout=0) == "0:0"
    errors = [raised[0], raised[1]]
    assert all(isinstance(e, ProducerClosedError) for e in errors), errors
    assert errors[0] is not errors[1]
    cause = errors[0].__cause__ if errors[0] is not None else None
    assert cause is not None and errors[1] is not None and errors[1].__cause__ is cause
    assert not isinstance(cause, ProducerClosedError)  # the store's own error
    assert "producer to topic public/default/t failed: 10 message(s)" in str(errors[1])
    for future in futures[0] + futures[1]:
        assert future.exception(timeout=WAIT) is cause
    with pytest.raises(ProducerClosedError) as closing:
        producer.close()
    assert closing.value.__cause__ is cause
    _repair_appends(store)
    assert [m.value for m in _read_all(store)] == [b"before"]


def test_what_is_queued_behind_a_failed_append_is_failed_untried(store: Store) -> None:
    _create(store)
    producer = Producer(store, "t", batching_max_messages=5, batching_max_publish_delay=HOUR)
    _break_appends(store)
    # Ten batches, queued while the first one's append fails in the background: once
    # that failure is seen, a send is refused (what was queued before it still counts).
    futures: list[Future[str | None]] = []
    with contextlib.suppress(ProducerClosedError):
        for i in range(50):
            futures.append(producer.send_async(f"{i}".encode()))
    assert len(futures) >= 5  # the first batch at least was queued before its append
    with pytest.raises(ProducerClosedError, match=f"{len(futures)} message") as raised:
        producer.flush()
    cause = raised.value.__cause__
    _repair_appends(store)  # the store works again; the producer stays failed
    with pytest.raises(ProducerClosedError):
        producer.send_async(b"later")
    with pytest.raises(ProducerClosedError):
        producer.close()
    assert _read_all(store) == []  # what was appended is a prefix of what was sent: none
    for future in futures:
        error = future.exception(timeout=WAIT)
        # In the failed append (its own error), or queued behind it (refused).
        assert error is cause or (
            isinstance(error, ProducerClosedError)
            and "not appended, as an earlier append failed" in str(error)
            and error.__cause__ is cause
        ), error


class _Crash(BaseException):
    """Escapes a done callback's error handling: the flusher thread stops on it."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_flusher_thread_that_crashed_fails_flush_close_and_the_with_block(
    store: Store,
) -> None:
    _create(store)
    in_callback, release = threading.Event(), threading.Event()

    def crash(_: Future[str | None]) -> None:
        in_callback.set()
        release.wait(timeout=WAIT)
        raise _Crash

    with pytest.raises(ProducerClosedError, match="the first failure: _Crash") as raised:
        with Producer(
            store, "t", batching_max_messages=2, batching_max_publish_delay=HOUR
        ) as producer:
            first = producer.send_async(b"a")
            first.add_done_callback(crash)
            producer.send_async(b"b")  # a full batch: appended; its callback holds the thread
            assert in_callback.wait(timeout=WAIT)
            queued = [producer.send_async(b"c"), producer.send_async(b"d")]  # behind it
            release.set()
    assert isinstance(raised.value.__cause__, _Crash)
    assert "2 message(s) sent with it were not appended" in str(raised.value)
    assert first.result(timeout=0) == "0:0"  # appended before the crash
    for future in queued:
        error = future.exception(timeout=0)
        assert isinstance(error, ProducerClosedError)
        assert isinstance(error.__cause__, _Crash)
    for call in (producer.flush, producer.close, lambda: producer.send_async(b"e")):
        with pytest.raises(ProducerClosedError):
            call()
    assert [m.value for m in _read_all(store)] == [b"a", b"b"]


def test_a_bad_value_raises_from_send_async_and_is_not_buffered(store: Store) -> None:
    _create(store, schema_type="json")
    with Producer(store, "t") as producer:
        with pytest.raises(PayloadError, match="not JSON-serialisable"):
            producer.send_async({1, 2})
        with pytest.raises(PayloadError, match="key must be a str"):
            producer.send_async({"a": 1}, key=5)  # type: ignore[arg-type]
        with pytest.raises(PayloadError, match="properties must be a dict of str to str"):
            producer.send_async({"a": 1}, properties={"n": 1})  # type: ignore[dict-item]
        with pytest.raises(PayloadError, match="event_time must be a datetime"):
            producer.send_async({"a": 1}, event_time="2024-01-01")  # type: ignore[arg-type]
        with pytest.raises(PayloadError, match="sequence_id must be an int of 0 or more"):
            producer.send_async({"a": 1}, sequence_id=-1)
        with pytest.raises(ConfigError, match="between 0 and 0; got 3"):
            producer.send_async({"a": 1}, partition=3)
        good = producer.send_async({"a": 1})
    assert good.result(timeout=WAIT) == "0:0"
    assert [m.value for m in _read_all(store)] == [b'{"a":1}']


# --- de-duplication -------------------------------------------------------------------------------


def test_sequence_ids_deduplicate_within_and_across_batches(store: Store) -> None:
    _create(store)
    with Producer(
        store, "t", name="p", batching_max_messages=3, batching_max_publish_delay=HOUR
    ) as producer:
        sequence = [1, 2, 2, 3, 1, 5, 4, 6, None, 6]
        futures = [producer.send_async(f"s{s}".encode(), sequence_id=s) for s in sequence]
    assert _results(futures) == ["0:0", "0:1", None, "0:2", None, "0:3", None, "0:4", "0:5", None]
    # Another producer object of the same name continues the same sequence.
    with Producer(store, "t", name="p") as again:
        assert again.send_async(b"old", sequence_id=6).result(timeout=WAIT) is None
        assert again.send_async(b"new", sequence_id=7).result(timeout=WAIT) == "0:6"
    assert [m.sequence_id for m in _read_all(store)] == [1, 2, 3, 5, 6, None, 7]


# --- threads --------------------------------------------------------------------------------------


def test_concurrent_senders_lose_nothing_and_keep_their_order_per_partition(store: Store) -> None:
    threads_n, per_thread = 4, 500
    _create(store, partitions=3)
    producer = Producer(store, "t", batching_max_messages=50)
    futures: dict[int, list[Future[str | None]]] = {}
    start = threading.Barrier(threads_n)

    def send(thread: int) -> None:
        start.wait(timeout=WAIT)
        # Thread 0 sends by key (one partition), the others round robin.
        key = "same-key" if thread == 0 else None
        futures[thread] = [
            producer.send_async(f"{thread}:{i}".encode(), key=key) for i in range(per_thread)
        ]

    senders = [threading.Thread(target=send, args=(t,)) for t in range(threads_n)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=WAIT)
        assert not sender.is_alive()
    producer.close()

    ids = [i for t in range(threads_n) for i in _results(futures[t])]
    assert None not in ids and len(set(ids)) == threads_n * per_thread
    got = _read_all(store)
    assert sorted(m.message_id for m in got) == sorted(i for i in ids if i is not None)
    by_partition: dict[tuple[int, int], list[int]] = {}
    for m in got:  # read in offset order per partition
        thread, index = map(int, (m.value or b"").decode().split(":"))
        by_partition.setdefault((m.partition, thread), []).append(index)
    for (partition, thread), indexes in by_partition.items():
        assert indexes == sorted(indexes), f"thread {thread}'s order broke in {partition}"
    assert sum(len(v) for v in by_partition.values()) == threads_n * per_thread
    # Each message's future names the offset at which it was read back.
    values = {m.message_id: m.value for m in got}
    for t in range(threads_n):
        for i, message_id in enumerate(_results(futures[t])):
            assert values[message_id or ""] == f"{t}:{i}".encode()


# --- the flusher thread ---------------------------------------------------------------------------


def test_only_send_async_starts_a_thread_and_close_joins_it(store: Store) -> None:
    _create(store)
    before = set(_flusher_threads())
    producer = Producer(store, "t")
    producer.send(b"sync")
    producer.send_batch([Message(b"batch")])
    producer.flush()
    assert set(_flusher_threads()) == before  # never used async: no thread
    future = producer.send_async(b"async")
    [thread] = set(_flusher_threads()) - before
    assert thread.daemon and thread.is_alive()
    producer.close()
    assert not thread.is_alive()
    assert future.result(timeout=0) == "0:2"  # close flushed it
    with pytest.raises(ProducerClosedError):
        producer.send_async(b"late")
    with pytest.raises(ProducerClosedError):
        producer.send(b"late")
    with pytest.raises(ProducerClosedError):
        producer.send_batch([Message(b"late")])


def test_a_with_block_closes_the_producer(store: Store) -> None:
    _create(store)
    with Producer(store, "t", batching_max_publish_delay=HOUR) as producer:
        future = producer.send_async(b"x")
        thread = producer._batcher.thread
    assert future.result(timeout=0) == "0:0"
    assert thread is not None and not thread.is_alive()


def test_a_done_callback_cannot_wait_for_its_own_producer(store: Store) -> None:
    _create(store)
    seen: list[BaseException | None] = []
    with Producer(store, "t") as producer:

        def on_done(_: Future[str | None]) -> None:
            try:
                producer.flush()
            except ConfigError as exc:
                seen.append(exc)
            # Sending more from a callback is fine.
            producer.send_async(b"from callback")

        producer.send_async(b"x").add_done_callback(on_done)
        producer.flush()
    assert len(seen) == 1 and "send_async callback" in str(seen[0])
    assert [m.value for m in _read_all(store)] == [b"x", b"from callback"]


def test_a_future_cannot_be_cancelled_once_handed_over(store: Store) -> None:
    _create(store)
    with Producer(store, "t", batching_max_publish_delay=HOUR) as producer:
        future = producer.send_async(b"x")
        assert future.cancel() is False
    assert future.result(timeout=0) == "0:0"


def test_futures_work_with_wait_as_completed_and_callbacks(store: Store) -> None:
    _create(store)
    with Producer(store, "t", batching_max_messages=3) as producer:
        futures = [producer.send_async(f"{i}".encode()) for i in range(10)]
        seen: list[str | None] = []
        futures[-1].add_done_callback(lambda f: seen.append(f.result()))
        done, not_done = wait(futures, timeout=WAIT)
        assert (len(done), not_done) == (10, set())
        assert sorted(f.result() or "" for f in as_completed(futures, timeout=WAIT)) == sorted(
            f"0:{i}" for i in range(10)
        )
        assert all(f.done() and not f.cancelled() for f in futures)
        assert "finished returned str" in repr(futures[0])
    assert seen == ["0:9"]
    late: list[str | None] = []
    futures[0].add_done_callback(lambda f: late.append(f.result()))  # already done: runs now
    assert late == ["0:0"]


def test_what_is_buffered_at_interpreter_exit_is_appended(sqlite_store: Store) -> None:
    _create(sqlite_store)
    url, data_dir = sqlite_store.url, sqlite_store.data_dir
    child = (
        "from sparkfn.store.store import Store\n"
        "from sparkfn.topics.producer import Producer\n"
        f"store = Store.open({url!r}, {str(data_dir)!r})\n"
        "producer = Producer(store, 't', batching_max_publish_delay=3600)\n"
        "for i in range(10):\n"
        "    producer.send_async(str(i).encode())\n"
        # No flush, no close: the exit hook must append them.
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert [m.value for m in _read_all(sqlite_store)] == [str(i).encode() for i in range(10)]
