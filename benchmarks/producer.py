"""Throughput of one producer and one consumer, against the raw paths below them (no Spark).

Run it with ``make bench`` or::

    .venv/bin/python benchmarks/producer.py [--messages N] [--repeats R] [--store-url URL]

Each figure is the median of R repeats (3 by default), each on a fresh topic:

1. ``Producer.send``: one message per call, durable when it returns (one
   store transaction each), on ``--single-count`` messages;
2. ``Producer.send_async``: one message per call, client-side batching
   (Pulsar's defaults: 1,000 messages or 10 ms), then ``flush()``; timed
   to the end of the flush, so every message is durable;
3. ``Producer.send_batch`` in batches of ``--batch-size``: the baseline for
   both, since it is what they turn into;
4. ``Consumer.receive(max_messages=--receive-max)`` until the topic is read,
   and the same with each message's ``value`` read, since fields are
   converted only when asked for;
5. ``reading.read_range`` per partition (Arrow batches): the baseline for the
   consumer.

Values are 100 random bytes, keyed over 10,000 keys; building them is not
timed. The store is a SQLite file in a temporary directory, or ``--store-url``
(an existing store: the topics it creates are deleted at the end). Numbers
are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import load_average

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.log import end_offsets
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.reading import read_range

VALUE_SIZE = 100
KEYS = 10_000


@dataclass
class Figure:
    """One measured step: the median of its repeats."""

    step: str
    messages: int
    runs: list[float]

    @property
    def seconds(self) -> float:
        return statistics.median(self.runs)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else float("nan")


class Bench:
    """The store, the messages, and fresh topics for every repeat."""

    def __init__(self, store: Store, args: argparse.Namespace) -> None:
        self.store = store
        self.args = args
        self.admin = TopicAdmin(store)
        self.created: list[str] = []
        blob = os.urandom(args.messages * VALUE_SIZE)
        self.values = [blob[i * VALUE_SIZE : (i + 1) * VALUE_SIZE] for i in range(args.messages)]
        self.keys = [f"key-{i % KEYS}" for i in range(args.messages)]

    def topic(self, kind: str) -> TopicInfo:
        name = f"bench-{kind}-{uuid.uuid4().hex[:8]}"
        self.created.append(name)
        return self.admin.create(name, partitions=self.args.partitions, schema_type="bytes")

    def size(self, info: TopicInfo) -> int:
        return sum(end - start for start, end in end_offsets(self.store, info).values())

    def check(self, info: TopicInfo, expected: int, what: str) -> None:
        found = self.size(info)
        if found != expected:
            wrong_count(f"{what}: the topic holds {found:,} of {expected:,} messages")

    def drop_topics(self) -> None:
        for name in self.created:
            self.admin.delete(name)


def wrong_count(what: str) -> None:
    """Say loudly that a message was lost or repeated; the figures go on."""
    print(f"!!! COUNT MISMATCH: {what}", flush=True)


def timed(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def repeat(times: int, once: Callable[[], float]) -> list[float]:
    return [once() for _ in range(times)]


# --- producing ------------------------------------------------------------------------


def bench_send(bench: Bench) -> Figure:
    count = bench.args.single_count

    def once() -> float:
        info = bench.topic("send")
        producer = Producer(bench.store, info.name)
        values, keys = bench.values[:count], bench.keys[:count]

        def run() -> None:
            for value, key in zip(values, keys, strict=True):
                producer.send(value, key=key)

        seconds = timed(run)
        bench.check(info, count, "send")
        return seconds

    return Figure(
        "Producer.send (1/call, durable on return)", count, repeat(bench.args.repeats, once)
    )


def bench_send_async(bench: Bench) -> Figure:
    def once() -> float:
        info = bench.topic("async")
        producer = Producer(bench.store, info.name)
        values, keys = bench.values, bench.keys

        def run() -> None:
            send = producer.send_async
            for value, key in zip(values, keys, strict=True):
                send(value, key=key)
            producer.flush()

        seconds = timed(run)
        producer.close()
        bench.check(info, len(values), "send_async")
        return seconds

    return Figure(
        "Producer.send_async (1/call) + flush",
        bench.args.messages,
        repeat(bench.args.repeats, once),
    )


def bench_send_batch(bench: Bench) -> tuple[Figure, TopicInfo]:
    size = bench.args.batch_size
    messages = [Message(v, key=k) for v, k in zip(bench.values, bench.keys, strict=True)]
    infos: list[TopicInfo] = []

    def once() -> float:
        info = bench.topic("batch")
        infos.append(info)
        producer = Producer(bench.store, info.name)

        def run() -> None:
            for first in range(0, len(messages), size):
                producer.send_batch(messages[first : first + size])

        seconds = timed(run)
        bench.check(info, len(messages), "send_batch")
        return seconds

    runs = repeat(bench.args.repeats, once)
    return Figure(f"Producer.send_batch ({size:,}/call)", len(messages), runs), infos[0]


# --- consuming ------------------------------------------------------------------------


def bench_receive(bench: Bench, info: TopicInfo, read_value: bool) -> Figure:
    most = bench.args.receive_max

    def once() -> float:
        received = 0

        def run() -> None:
            nonlocal received
            consumer = Consumer(bench.store, info.name, initial_position="earliest")
            while batch := consumer.receive(max_messages=most):
                received += len(batch)
                if read_value:
                    for message in batch:
                        message.value  # noqa: B018 (the read is what is measured)

        seconds = timed(run)
        if received != bench.args.messages:
            wrong_count(f"receive: {received:,} of {bench.args.messages:,} messages")
        return seconds

    step = f"Consumer.receive ({most:,} max)" + (" + .value of each" if read_value else "")
    return Figure(step, bench.args.messages, repeat(bench.args.repeats, once))


def bench_read_range(bench: Bench, info: TopicInfo) -> Figure:
    def once() -> float:
        rows = 0

        def run() -> None:
            nonlocal rows
            for part, (start, end) in end_offsets(bench.store, info).items():
                for batch in read_range(bench.store, info, part, start, end):
                    rows += batch.num_rows

        seconds = timed(run)
        if rows != bench.args.messages:
            wrong_count(f"read_range: {rows:,} of {bench.args.messages:,} messages")
        return seconds

    return Figure("log.read_range (Arrow)", bench.args.messages, repeat(bench.args.repeats, once))


# --- output ---------------------------------------------------------------------------


def print_table(figures: list[Figure]) -> None:
    width = max(len(f.step) for f in figures)
    header = f"{'step':<{width}}  {'messages':>10}  {'median s':>8}  {'msg/s':>11}  {'MB/s':>7}  runs (s)"
    print(header)
    print("-" * len(header))
    for f in figures:
        runs = ", ".join(f"{r:.3f}" for r in f.runs)
        print(
            f"{f.step:<{width}}  {f.messages:>10,}  {f.seconds:>8.3f}  {f.rate:>11,.0f}  "
            f"{f.rate * VALUE_SIZE / 1e6:>7.1f}  {runs}"
        )


def ratio(name: str, measured: Figure, baseline: Figure) -> None:
    print(
        f"{name}: {measured.rate:,.0f} msg/s vs {baseline.rate:,.0f} msg/s "
        f"-> ratio {measured.rate / baseline.rate:.3f}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages (default 1M)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per figure (default 3)")
    parser.add_argument(
        "--store-url", default=None, help="store URL (default: SQLite in a temp dir)"
    )
    parser.add_argument("--partitions", type=int, default=4, help="topic partitions (default 4)")
    parser.add_argument("--batch-size", type=int, default=10_000, help="send_batch size")
    parser.add_argument("--single-count", type=int, default=2_000, help="messages sent with send")
    parser.add_argument("--receive-max", type=int, default=100_000, help="receive max_messages")
    args = parser.parse_args(argv)
    for name in ("messages", "repeats", "partitions", "batch_size", "single_count", "receive_max"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    args.single_count = min(args.single_count, args.messages)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wall = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="sparkfn-bench-producer-"))
    url = args.store_url or f"sqlite:///{work / 'sparkfn.db'}"
    store = Store.open(url, work)
    try:
        print(
            f"sparkfn producer/consumer benchmark: {args.messages:,} messages x {VALUE_SIZE} B, "
            f"{args.partitions} partitions, store {'sqlite' if args.store_url is None else url}, "
            f"{args.repeats} repeats, {os.cpu_count()} CPUs, load average {load_average()}",
            flush=True,
        )
        bench = Bench(store, args)
        try:
            batch, info = bench_send_batch(bench)
            figures = [
                bench_send(bench),
                bench_send_async(bench),
                batch,
                bench_receive(bench, info, read_value=False),
                bench_receive(bench, info, read_value=True),
                bench_read_range(bench, info),
            ]
        finally:
            bench.drop_topics()
    finally:
        store.close()
        shutil.rmtree(work, ignore_errors=True)

    send, send_async, send_batch, receive, receive_value, raw = figures
    print()
    print_table(figures)
    print()
    ratio("send vs send_batch", send, send_batch)
    ratio("send_async vs send_batch", send_async, send_batch)
    ratio("send_async vs send", send_async, send)
    ratio("Consumer.receive vs read_range", receive, raw)
    ratio("Consumer.receive + .value vs read_range", receive_value, raw)
    print(
        f"total wall time: {time.perf_counter() - wall:.1f} s "
        f"(load average now {load_average()}; other load on the machine skews all numbers)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
