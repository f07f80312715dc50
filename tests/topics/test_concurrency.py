"""Appends from several processes, and a producer killed with SIGKILL mid-append.

Children are started with the ``spawn`` method, so each one is a fresh
interpreter with its own store connections, like separate producers on one
machine.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
import traceback
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from sparkfn.store.store import Store
from sparkfn.topics import segments
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import partition_for_key
from sparkfn.topics.message import Message, ReceivedMessage, messages_from_table
from sparkfn.topics.producer import Producer
from sparkfn.topics.reading import read_range
from waiting import until

SPAWN = multiprocessing.get_context("spawn")


def _read_partition(store: Store, topic: TopicInfo, partition: int) -> list[ReceivedMessage]:
    return [m for b in read_range(store, topic, partition, 0) for m in messages_from_table(b)]


# the shared bounded wait (tests/waiting.py), with this module's timeout
_wait_for = partial(until, every=0.01)


# --- many producer processes ----------------------------------------------------------------

PROCESSES = 4
APPENDS = 50
PARTITIONS = 3


def _produce(url: str, data_dir: str, proc: int, go: Any, out: str) -> None:
    """Child: APPENDS batches of 1-20 unique messages; writes (payload, key, id) per message."""
    try:
        store = Store.open(url, data_dir)
        producer = Producer(store, "t")
        rng = random.Random(proc)
        records = []
        if not go.wait(60):
            raise TimeoutError("the parent never said go")
        for batch in range(APPENDS):
            messages = []
            for index in range(rng.randint(1, 20)):
                key = f"k{rng.randint(0, 9)}" if rng.random() < 0.4 else None
                messages.append(Message(f"p{proc}-b{batch}-m{index}".encode(), key=key))
            ids = producer.send_batch(messages)
            records.extend(
                (m.value.decode(), m.key, i)  # type: ignore[union-attr]
                for m, i in zip(messages, ids, strict=True)
            )
        store.close()
        Path(out).write_text(json.dumps({"records": records}))
    except BaseException:
        Path(out).write_text(json.dumps({"error": traceback.format_exc()}))
        raise


def test_concurrent_producer_processes(store: Store, store_url: str, tmp_path: Path) -> None:
    topic = TopicAdmin(store).create("t", partitions=PARTITIONS)
    go = SPAWN.Event()
    outs = [tmp_path / f"producer-{p}.json" for p in range(PROCESSES)]
    procs = [
        SPAWN.Process(target=_produce, args=(store_url, str(store.data_dir), p, go, str(outs[p])))
        for p in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    go.set()  # all of them start appending at once
    try:
        for proc in procs:
            proc.join(timeout=90)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(10)
    results = [json.loads(out.read_text()) if out.exists() else {} for out in outs]
    for proc, result in zip(procs, results, strict=True):
        assert "error" not in result, result["error"]
        assert proc.exitcode == 0, f"producer {proc.pid} exited with {proc.exitcode}"

    sent: dict[str, tuple[str | None, str]] = {}
    for result in results:
        for payload, key, message_id in result["records"]:
            assert message_id is not None, f"{payload} was dropped but has no sequence id"
            sent[payload] = (key, message_id)
    total = sum(len(r["records"]) for r in results)
    assert len(sent) == total  # payloads are unique

    read: Counter[str] = Counter()
    where: dict[str, str] = {}
    stats = TopicAdmin(store).stats("t")
    for partition in range(PARTITIONS):
        messages = _read_partition(store, topic, partition)
        offsets = [m.offset for m in messages]
        assert offsets == list(range(len(messages))), f"partition {partition}: offsets not 0..N-1"
        assert stats[partition].end_offset == len(messages)
        senders: dict[str, list[tuple[int, int]]] = {}
        for m in messages:
            payload = m.value.decode()  # type: ignore[union-attr]
            read[payload] += 1
            where[payload] = m.message_id
            if m.key is not None:
                assert m.partition == partition_for_key(m.key, PARTITIONS), payload
            proc, batch, index = payload.split("-")
            senders.setdefault(proc, []).append((int(batch[1:]), int(index[1:])))
        # Each producer's messages appear in the order it sent them.
        for proc, order in senders.items():
            assert order == sorted(order), f"partition {partition}: {proc} out of order"
    assert read == Counter(sent.keys()), "messages read back differ from messages sent"
    assert max(read.values()) == 1
    mismatched = {p: (mid, where[p]) for p, (_, mid) in sent.items() if where[p] != mid}
    assert not mismatched, f"send_batch ids differ from where messages were read: {mismatched}"
    assert sum(s.end_offset for s in stats) == total


# --- a producer killed mid-append --------------------------------------------------------------

KILL_ROUNDS = 3
FILLER = b"x" * 3000


def _batch_size(batch: int) -> int:
    """50..119 messages: at least 25 per partition, so each segment is a file."""
    return 50 + (batch * 37) % 70


def _produce_until_killed(url: str, data_dir: str, label: str, progress: str) -> None:
    """Child: append large multi-partition batches forever, logging begin/done of each."""
    store = Store.open(url, data_dir)
    producer = Producer(store, "big")
    deadline = time.monotonic() + 60  # never outlive a parent that forgot us
    with open(progress, "a", buffering=1) as log:
        batch = 0
        while time.monotonic() < deadline:
            size = _batch_size(batch)
            name = f"{label}.{batch}"
            messages = [Message(f"{name}:{i}:{size}:".encode() + FILLER) for i in range(size)]
            log.write(f"begin {name}\n")
            producer.send_batch(messages)  # round-robin over both partitions, one transaction
            log.write(f"done {name}\n")
            batch += 1


def _progress(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")[:-1]  # the last line may be cut short by the kill
    return [tuple(line.split(" ", 1)) for line in lines]  # type: ignore[misc]


def _kill_mid_append(
    store_url: str, data_dir: Path, label: str, progress: Path, rng: random.Random
) -> bool:
    """Start a child producer, SIGKILL it at a random moment after 3 appends.

    Returns whether the kill landed between the start and the end of an append.
    """
    proc = SPAWN.Process(
        target=_produce_until_killed, args=(store_url, str(data_dir), label, str(progress))
    )
    proc.start()

    def three_done() -> bool:
        if not proc.is_alive():
            pytest.fail(f"producer child died by itself (exit code {proc.exitcode})")
        done = [n for s, n in _progress(progress) if s == "done" and n.startswith(f"{label}.")]
        return len(done) >= 3

    try:
        _wait_for(three_done, f"{label}: 3 appends from the child", 60)
        time.sleep(rng.uniform(0.0, 0.3))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
    assert proc.exitcode == -signal.SIGKILL
    return _progress(progress)[-1][0] == "begin"


def test_sigkill_mid_append_exposes_no_partial_segment(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    topic = TopicAdmin(store).create("big", partitions=2)
    assert _batch_size(0) // 2 * len(FILLER) > segments.INLINE_LIMIT
    rng = random.Random()
    progress = tmp_path / "progress.log"
    mid_append = 0
    for round_ in range(KILL_ROUNDS):
        if _kill_mid_append(store_url, store.data_dir, f"r{round_}", progress, rng):
            mid_append += 1

    events = _progress(progress)
    begun = {name for state, name in events if state == "begin"}
    done = {name for state, name in events if state == "done"}

    seen: dict[str, list[int]] = {}
    ends = {}
    for partition in range(2):
        messages = _read_partition(store, topic, partition)
        assert [m.offset for m in messages] == list(range(len(messages))), (
            f"partition {partition}: offsets are not contiguous from 0"
        )
        ends[partition] = len(messages)
        for m in messages:
            assert m.value is not None
            name, index, size, rest = m.value.split(b":", 3)
            assert rest == FILLER, f"message {m.message_id} is truncated or corrupt"
            seen.setdefault(name.decode(), []).append(int(index))
            assert int(size) == _batch_size(int(name.split(b".")[1]))
    for name, indices in seen.items():
        size = _batch_size(int(name.split(".")[1]))
        assert sorted(indices) == list(range(size)), f"batch {name} is only partly visible"
    assert set(seen) <= begun, f"batches visible that were never sent: {set(seen) - begun}"
    assert done <= set(seen), f"acknowledged appends missing: {done - set(seen)}"
    # At most the one append in flight per kill is unaccounted for.
    assert len(begun - done) <= KILL_ROUNDS
    assert TopicAdmin(store).stats("big")[0].end_offset == ends[0]

    # The topic is still writable, right after the last visible offset.
    ids = Producer(store, "big").send_batch(
        [Message(f"after:{i}:2:".encode() + FILLER) for i in range(40)]
    )
    assert sorted(ids) == sorted(  # type: ignore[type-var]
        [f"{p}:{o}" for p in range(2) for o in range(ends[p], ends[p] + 20)]
    )
    for partition in range(2):
        tail = _read_partition(store, topic, partition)[ends[partition] :]
        assert [m.value.split(b":")[0] for m in tail] == [b"after"] * 20  # type: ignore[union-attr]
    print(f"{mid_append} of {KILL_ROUNDS} kills landed between begin and done of an append")
