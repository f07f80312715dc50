"""Throughput of sparkfn topics: produce, consume, and a Spark streaming copy.

Run it with ``make bench`` or::

    .venv/bin/python benchmarks/topics.py [--messages N] [--repeats R] [--store-url URL]

What it measures (all on one store, by default a SQLite file in a temporary
data directory; ``--store-url postgresql://...`` runs on PostgreSQL in a fresh
schema that is dropped afterwards):

1. produce: ``Producer.send_batch`` of N messages (100-byte values, keyed) in
   batches, and ``Producer.send`` one message at a time on a smaller count
   (one store transaction per message);
2. consume: the same N messages read back with ``Consumer.receive`` and with
   raw ``reading.read_range`` per partition;
3. spark copy: a Structured Streaming query ``format("sparkfn")`` ->
   ``format("sparkfn")`` (``Trigger.AvailableNow``) over the N messages,
   against Spark's own Parquet file source -> Parquet file sink on the same
   (key, value) rows, timed from query start to termination, repeated, and
   compared in the same run. The sparkfn copy runs twice: reading every
   message column (Spark cannot prune a Python source's columns), and with
   the reader's ``columns=key,value``.

MB/s counts value payload bytes only (1 MB = 10**6 bytes). The numbers are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from _common import bench_store, load_average

from sparkfn.runtime.spark.session import spark_session
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.log import end_offsets
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.reading import read_range
from sparkfn.topics.spark.source import spark_options

VALUE_SIZE = 100
KEYS = 10_000  # distinct keys; messages are keyed so routing is by key hash
SPARK_MASTER = "local[2]"
WARMUP_MESSAGES = 10_000
PARQUET_SCHEMA = "key string, value binary"


@dataclass
class Row:
    """One line of the results table."""

    step: str
    messages: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else float("nan")

    @property
    def mb_rate(self) -> float:
        return self.rate * VALUE_SIZE / 1e6


@dataclass
class SparkRun:
    """One timed streaming query."""

    seconds: float
    rows: int
    batches: int
    duration_ms: dict[str, int] = field(default_factory=dict)


# --- data --------------------------------------------------------------------


def make_messages(count: int, offset: int = 0) -> list[Message]:
    """``count`` keyed messages with distinct random 100-byte values."""
    blob = os.urandom(count * VALUE_SIZE)
    return [
        Message(blob[i * VALUE_SIZE : (i + 1) * VALUE_SIZE], key=f"key-{(offset + i) % KEYS}")
        for i in range(count)
    ]


def produce(store: Store, topic: str, messages: list[Message], batch_size: int) -> float:
    producer = Producer(store, topic)
    started = time.perf_counter()
    for first in range(0, len(messages), batch_size):
        producer.send_batch(messages[first : first + batch_size])
    return time.perf_counter() - started


def produce_single(store: Store, topic: str, messages: list[Message]) -> float:
    producer = Producer(store, topic)
    started = time.perf_counter()
    for message in messages:
        producer.send(message.value, key=message.key)
    return time.perf_counter() - started


def topic_size(store: Store, topic: TopicInfo) -> int:
    return sum(end - start for start, end in end_offsets(store, topic).values())


# --- benchmarks ----------------------------------------------------------------


def bench_produce(store: Store, args: argparse.Namespace, out: list[Row]) -> TopicInfo:
    admin = TopicAdmin(store)
    info = admin.create("bench-src", partitions=args.partitions, schema_type="bytes")
    messages = make_messages(args.messages)
    seconds = produce(store, "bench-src", messages, args.batch_size)
    del messages
    out.append(Row(f"produce send_batch ({args.batch_size:,}/call)", args.messages, seconds))
    if topic_size(store, info) != args.messages:
        raise RuntimeError("produce: the topic does not hold every message")

    admin.create("bench-single", partitions=args.partitions, schema_type="bytes")
    singles = make_messages(args.single_count)
    seconds = produce_single(store, "bench-single", singles)
    out.append(Row("produce send (1/call, 1 txn each)", args.single_count, seconds))
    return info


def bench_consume(store: Store, info: TopicInfo, args: argparse.Namespace, out: list[Row]) -> None:
    started = time.perf_counter()
    consumer = Consumer(store, info.name, initial_position="earliest")
    received = 0
    while batch := consumer.receive(max_messages=args.receive_max):
        received += len(batch)
    seconds = time.perf_counter() - started
    out.append(Row(f"consume Consumer.receive ({args.receive_max:,} max)", received, seconds))

    started = time.perf_counter()
    rows = 0
    for part, (start, end) in end_offsets(store, info).items():
        for batch in read_range(store, info, part, start, end):
            rows += batch.num_rows
    seconds = time.perf_counter() - started
    out.append(Row("consume log.read_range (Arrow)", rows, seconds))
    if received != args.messages or rows != args.messages:
        raise RuntimeError(f"consume: read {received} / {rows} of {args.messages} messages")


def write_parquet_copy(store: Store, info: TopicInfo, directory: Path) -> None:
    """The topic's (key, value) rows as Parquet, one file per topic partition."""
    directory.mkdir(parents=True)
    for part, (start, end) in end_offsets(store, info).items():
        batches = [b.select(["key", "value"]) for b in read_range(store, info, part, start, end)]
        pq.write_table(pa.Table.from_batches(batches), directory / f"part-{part:05d}.parquet")


def run_query(start: Callable[[], Any]) -> SparkRun:
    """Start a streaming query, wait for it, and time it end to end."""
    started = time.perf_counter()
    query = start()
    query.awaitTermination()
    seconds = time.perf_counter() - started
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"streaming query failed: {error}")
    progress = query.recentProgress
    duration: dict[str, int] = {}
    for p in progress:
        for key, value in (p["durationMs"] or {}).items():
            duration[key] = duration.get(key, 0) + int(value)
    batches = sum(1 for p in progress if p["numInputRows"])
    return SparkRun(seconds, sum(p["numInputRows"] for p in progress), batches, duration)


def sparkfn_copy(
    spark: Any, store: Store, source: str, target: str, checkpoint: Path, *, columns: str = ""
) -> Callable[[], Any]:
    """The copy through sparkfn's source and sink, of (key, value).

    Spark cannot prune a Python data source's columns, so ``.select`` alone
    leaves the reader shipping every message column to the JVM; the
    reader's ``columns`` option is how a query asks for fewer.
    """

    def start() -> Any:
        reader = (
            spark.readStream.format("sparkfn")
            .options(**spark_options(store))
            .option("topic", source)
            .option("startingOffsets", "earliest")
        )
        if columns:
            reader = reader.option("columns", columns)
        return (
            reader.load()
            .select("key", "value")
            .writeStream.format("sparkfn")
            .options(**spark_options(store))
            .option("topic", target)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    return start


def parquet_copy(spark: Any, source: Path, target: Path, checkpoint: Path) -> Callable[[], Any]:
    def start() -> Any:
        return (
            spark.readStream.format("parquet")
            .schema(PARQUET_SCHEMA)
            .load(str(source))
            .writeStream.format("parquet")
            .option("path", str(target))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    return start


def parquet_rows(directory: Path) -> int:
    return int(pads.dataset(str(directory), format="parquet").count_rows())


COPIES = {
    "sparkfn": "sparkfn copy (every column read, then select key, value)",
    "sparkfn-columns": "sparkfn copy (reader option columns=key,value)",
    "parquet": "Spark Parquet copy (key, value)",
}


def bench_spark(
    store: Store, info: TopicInfo, args: argparse.Namespace, work: Path
) -> dict[str, list[SparkRun]]:
    """Each kind of copy ``--repeats`` times, the kinds alternating."""
    admin = TopicAdmin(store)
    parquet_src = work / "parquet-src"
    write_parquet_copy(store, info, parquet_src)

    started = time.perf_counter()
    spark = spark_session(master=SPARK_MASTER, app_name="sparkfn-bench")
    runs: dict[str, list[SparkRun]] = {kind: [] for kind in COPIES}
    try:
        # Warm-up, not timed: JVM JIT, Python worker start, data source registration.
        admin.create("warmup-src", partitions=args.partitions, schema_type="bytes")
        admin.create("warmup-dst", partitions=args.partitions, schema_type="bytes")
        produce(store, "warmup-src", make_messages(WARMUP_MESSAGES), WARMUP_MESSAGES)
        warm_parquet = work / "warmup-parquet"
        write_parquet_copy(store, admin.get("warmup-src"), warm_parquet)
        run_query(sparkfn_copy(spark, store, "warmup-src", "warmup-dst", work / "ck-warm-s"))
        run_query(parquet_copy(spark, warm_parquet, work / "warm-out", work / "ck-warm-p"))
        print(f"  session start + warm-up: {time.perf_counter() - started:.1f} s", flush=True)

        for r in range(args.repeats):
            for kind in COPIES:
                checkpoint = work / f"ck-{kind}-{r}"
                if kind == "parquet":
                    out_dir = work / f"parquet-out-{r}"
                    run = run_query(parquet_copy(spark, parquet_src, out_dir, checkpoint))
                    copied = parquet_rows(out_dir)
                else:
                    target = admin.create(f"bench-{kind}-{r}", partitions=args.partitions)
                    columns = "key,value" if kind == "sparkfn-columns" else ""
                    start = sparkfn_copy(
                        spark, store, "bench-src", target.name.name, checkpoint, columns=columns
                    )
                    run = run_query(start)
                    copied = topic_size(store, target)
                if copied != args.messages:
                    raise RuntimeError(f"{kind} copy {r}: {copied} of {args.messages} messages")
                runs[kind].append(run)
            times = ", ".join(f"{kind} {runs[kind][-1].seconds:.2f} s" for kind in COPIES)
            print(f"  repeat {r + 1}/{args.repeats}: {times}", flush=True)
    finally:
        spark.stop()
    return runs


# --- output ----------------------------------------------------------------------


def print_table(rows: list[Row]) -> None:
    width = max(len(r.step) for r in rows)
    header = f"{'step':<{width}}  {'messages':>10}  {'seconds':>8}  {'msg/s':>10}  {'MB/s':>7}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.step:<{width}}  {r.messages:>10,}  {r.seconds:>8.2f}  {r.rate:>10,.0f}  "
            f"{r.mb_rate:>7.1f}"
        )


def median_run(runs: list[SparkRun]) -> SparkRun:
    """The run nearest the median time (the faster one on a tie)."""
    middle = statistics.median(r.seconds for r in runs)
    return min(runs, key=lambda r: (abs(r.seconds - middle), r.seconds))


def breakdown(run: SparkRun) -> str:
    """Where a query's time went, from Spark's progress reports."""
    keys = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")
    parts = [f"{k} {run.duration_ms[k] / 1000:.2f}" for k in keys if k in run.duration_ms]
    outside = run.seconds - run.duration_ms.get("triggerExecution", 0) / 1000
    parts.append(f"outside triggers (query start/stop) {outside:.2f}")
    return f"{run.batches} batch(es); s: " + ", ".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages (default 1M)")
    parser.add_argument("--repeats", type=int, default=3, help="Spark copy repeats (default 3)")
    parser.add_argument(
        "--store-url",
        default=None,
        help="store URL (default: SQLite in a temp dir); a postgresql:// URL gets a fresh schema",
    )
    parser.add_argument("--partitions", type=int, default=4, help="topic partitions (default 4)")
    parser.add_argument("--batch-size", type=int, default=10_000, help="send_batch size")
    parser.add_argument("--single-count", type=int, default=2_000, help="single sends")
    parser.add_argument("--receive-max", type=int, default=100_000, help="receive max_messages")
    args = parser.parse_args(argv)
    for name in ("messages", "repeats", "partitions", "batch_size", "single_count", "receive_max"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wall = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="sparkfn-bench-"))
    try:
        with bench_store(args.store_url, work / "data") as (store, backend):
            print(
                f"sparkfn topics benchmark: {args.messages:,} messages x {VALUE_SIZE} B, "
                f"{args.partitions} partitions, store {backend}, Spark {SPARK_MASTER}, "
                f"{os.cpu_count()} CPUs, load average {load_average()}",
                flush=True,
            )
            rows: list[Row] = []
            info = bench_produce(store, args, rows)
            bench_consume(store, info, args, rows)
            print_table(rows)
            print(f"spark copy: warm-up, then {args.repeats} repeat(s) of each", flush=True)
            runs = bench_spark(store, info, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    medians = {kind: statistics.median(r.seconds for r in runs[kind]) for kind in COPIES}
    rows += [
        Row(f"{COPIES[kind]} (median of {args.repeats})", args.messages, seconds)
        for kind, seconds in medians.items()
    ]
    print()
    print_table(rows)
    print()
    for kind in COPIES:
        print(f"spark copy runs (s), {kind}: {[round(r.seconds, 2) for r in runs[kind]]}")
    for kind in COPIES:
        print(f"spark copy {kind}, run nearest the median: {breakdown(median_run(runs[kind]))}")
    p_rate = args.messages / medians["parquet"]
    for kind in ("sparkfn", "sparkfn-columns"):
        s_rate = args.messages / medians[kind]
        print(
            f"spark copy: {COPIES[kind]} {s_rate:,.0f} msg/s vs parquet {p_rate:,.0f} msg/s "
            f"-> ratio {s_rate / p_rate:.2f}"
        )
    batch_row, single_row, receive_row, range_row = rows[:4]
    print(
        f"produce: send {single_row.rate:,.0f} msg/s vs send_batch {batch_row.rate:,.0f} msg/s "
        f"-> ratio {single_row.rate / batch_row.rate:.4f}"
    )
    print(
        f"consume: Consumer.receive {receive_row.rate:,.0f} msg/s vs read_range "
        f"{range_row.rate:,.0f} msg/s -> ratio {receive_row.rate / range_row.rate:.2f}"
    )
    print(
        f"total wall time: {time.perf_counter() - wall:.1f} s "
        f"(load average now {load_average()}; other load on the machine skews all numbers)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
