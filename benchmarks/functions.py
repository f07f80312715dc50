"""Function runtime throughput against a hand-written native Spark job, measured in one run.

Every kind does the same work on the same 100-byte messages (``value + "!"``
per record), timed from the query's start to its end (``Trigger.AvailableNow``):

* native:     what a PySpark user writes instead of sparkfn, and the baseline:
              Spark's Parquet file stream (the messages written to Parquet
              beforehand, not timed) -> ``mapInArrow`` with a per-record
              Python loop -> Parquet file sink; in a child process of its
              own, whose JVM has Spark's default JIT (C1 and C2), as a
              user's job has: sparkfn's session compiles with C1 only
              (``sparkfn.runtime.spark.session.JIT_OPTIONS``), which makes
              the JVM's own work of a Parquet job slower (``--native-apart``);
* raw:        the same ``mapInArrow`` loop, but reading and writing topics
              through sparkfn's own data source and sink (no function
              runtime): what sparkfn's transport costs;
* per_record: the exclamation function as a sparkfn function
              (``process(input) -> input + "!"``, effectively_once), topic to
              topic through the function runtime: Context, per-message
              savepoints, stats, one-transaction commit;
* vectorized: the same as a VectorizedFunction (pyarrow compute);
* grouped:    the per_record function as the one member of a query group
              (``runtime/group``, the path a worker runs it on); with
              ``--group-size N`` also ``groupedN``: N such functions in one
              group, each on its own topic of ``--messages``/N messages, all
              writing one output topic (the same messages in all).

Prints medians of ``--repeats`` runs in msg/s, each as a ratio to the native
job, and vectorized / per_record. ``--scaling`` instead runs the native and
per_record kinds in a child process on ``local[1]``, pinned to one CPU, and
one on ``local[2]`` on two (a SparkSession's master is fixed for its
process), alternating for ``--rounds`` rounds, and prints each kind's
2-core / 1-core ratio per round and their median. Never asserts on time.

    .venv/bin/python benchmarks/functions.py --messages 1000000 --repeats 3
    .venv/bin/python benchmarks/functions.py --scaling --messages 1000000
    .venv/bin/python benchmarks/functions.py --messages 200000 --kinds native,per_record,grouped --group-size 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from _common import load_average, topic_total

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.group.run import QueryGroup
from sparkfn.runtime.spark.session import spark_session
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.log import end_offsets
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.reading import read_range

KINDS = ("native", "raw", "per_record", "vectorized", "grouped")
LABELS = {
    "native": "native Spark job (Parquet -> mapInArrow -> Parquet)",
    "raw": "raw mapInArrow through sparkfn source/sink",
    "per_record": "sparkfn per-record function (effectively_once)",
    "vectorized": "sparkfn vectorized function (effectively_once)",
    "grouped": "per-record function, a group of one",
}
SCALING_MASTERS = ("local[1]", "local[2]")
WARMUP_MESSAGES = 10_000
SUMMARY = "summary-json: "  # the line a --scaling parent reads from its child
VECTORIZED = """
import pyarrow as pa
import pyarrow.compute as pc
from sparkfn import VectorizedFunction


class Exclaim(VectorizedFunction):
    def process_batch(self, batch, context):
        return pa.record_batch([batch.column("key"), pc.binary_join_element_wise(batch.column("value"), "!", "")], names=["key", "value"])
"""
PER_RECORD = """
def process(input):
    return input + "!"
"""


def native_exclaim(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The baseline's work: a per-record Python loop over string values."""
    for batch in batches:
        out = [v + "!" for v in batch.column("value").to_pylist()]
        yield pa.record_batch(
            [batch.column("key"), pa.array(out, pa.string())], names=["key", "value"]
        )


def raw_exclaim(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The same loop over the sparkfn source's binary values."""
    for batch in batches:
        values = batch.column("value").to_pylist()
        out = [v.decode() + "!" for v in values]
        yield pa.record_batch(
            [batch.column("key"), pa.array(out, pa.string())], names=["key", "value"]
        )


# --- data ----------------------------------------------------------------------------


def fill(store: Store, topic: str, messages: int, partitions: int) -> None:
    TopicAdmin(store).create(topic, partitions=partitions, schema_type="string")
    producer = Producer(store, topic)
    payload = "x" * 99
    chunk = 50_000
    for first in range(0, messages, chunk):
        producer.send_batch(
            [
                Message(f"{payload}{i % 10}".encode(), key=f"k{i % 1000}")
                for i in range(first, min(messages, first + chunk))
            ]
        )


def write_parquet(store: Store, topic: str, directory: Path) -> None:
    """The topic's (key, value) rows as Parquet, values as strings, one file per partition."""
    info = TopicAdmin(store).get(topic)
    directory.mkdir(parents=True)
    for part, (start, end) in end_offsets(store, info).items():
        batches = [b.select(["key", "value"]) for b in read_range(store, info, part, start, end)]
        table = pa.Table.from_batches(batches)
        table = table.set_column(1, "value", table.column("value").cast(pa.string()))
        pq.write_table(table, directory / f"part-{part:05d}.parquet")


# --- the runs ----------------------------------------------------------------------------


Run = tuple[float, int, float]  # seconds from start to end, rows out, seconds to the first batch


def to_first_batch(checkpoint: Path, started: float) -> float:
    """Seconds from ``started`` (``time.time()``) until Spark logged the first batch's offsets.

    Read from the checkpoint, the same way for every kind: a function's
    query is stopped as soon as its last batch commits, often before Spark
    reports that batch's progress.
    """
    return (checkpoint / "offsets" / "0").stat().st_mtime - started


class Bench:
    """One session, one store, and the kinds' runs (each returns a :data:`Run`)."""

    def __init__(
        self, spark: Any, store: Store, work: Path, parallelism: int, member_budget: int
    ) -> None:
        self.spark = spark
        self.store = store
        self.work = work
        self.parallelism = parallelism
        self.member_budget = member_budget
        (work / "per_record.py").write_text(PER_RECORD)
        (work / "vectorized.py").write_text(VECTORIZED)

    def run(self, kind: str, source: str, tag: str) -> Run:
        runs: dict[str, Callable[[str, str], Run]] = {
            "native": self.native,
            "raw": self.raw,
            "per_record": lambda s, t: self.function(s, t, "per_record.py", "per_record.process"),
            "vectorized": lambda s, t: self.function(s, t, "vectorized.py", "vectorized.Exclaim"),
        }
        if kind.startswith("grouped"):
            size = int(kind.removeprefix("grouped") or 1)
            return self.grouped(group_inputs(source, size), tag)
        return runs[kind](source, tag)

    def native(self, source: str, tag: str) -> Run:
        output = self.work / tag
        wall = time.time()
        started = time.perf_counter()
        query = (
            self.spark.readStream.format("parquet")
            .schema("key string, value string")
            .load(str(self.work / f"parquet-{source}"))
            .mapInArrow(native_exclaim, "key string, value string")
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(self.work / f"ck-{tag}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - started
        rows = int(pads.dataset(str(output), format="parquet").count_rows())
        return seconds, rows, to_first_batch(self.work / f"ck-{tag}", wall)

    def raw(self, source: str, tag: str) -> Run:
        TopicAdmin(self.store).create(tag, partitions=4, schema_type="string")
        opts = {"storeUrl": self.store.url, "dataDir": str(self.store.data_dir)}
        wall = time.time()
        started = time.perf_counter()
        query = (
            self.spark.readStream.format("sparkfn")
            .options(**opts)
            .option("topic", source)
            .option("startingOffsets", "earliest")
            .option("columns", "key,value")  # the best a hand-written job can do
            .load()
            .mapInArrow(raw_exclaim, "key string, value string")
            .writeStream.format("sparkfn")
            .options(**opts)
            .option("topic", tag)
            .option("checkpointLocation", str(self.work / f"ck-{tag}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - started
        return seconds, topic_total(self.store, tag), to_first_batch(self.work / f"ck-{tag}", wall)

    def config(
        self, name: str, source: str, output: str, py: str, classname: str
    ) -> FunctionConfig:
        return FunctionConfig.build(
            name=name,
            py=str(self.work / py),
            classname=classname,
            inputs=[source],
            output=output,
            subscription_position="earliest",
            processing_guarantees="effectively_once",
            parallelism=self.parallelism,
        )

    def function(self, source: str, tag: str, py: str, classname: str) -> Run:
        TopicAdmin(self.store).create(tag, partitions=4, schema_type="string")
        config = self.config(tag, source, tag, py, classname)
        wall = time.time()
        started = time.perf_counter()
        run = FunctionRun(config, store=self.store, spark=self.spark)
        run.start(until_drained=True, checkpoint=self.work / f"ck-{tag}")
        run.wait()
        seconds = time.perf_counter() - started
        first = to_first_batch(self.work / f"ck-{tag}", wall)
        return seconds, topic_total(self.store, tag), first

    def grouped(self, sources: list[str], tag: str) -> Run:
        """The per-record function as members of one query group, one per source topic,
        all writing topic ``tag``; timed from the members' start to the group's close."""
        TopicAdmin(self.store).create(tag, partitions=4, schema_type="string")
        configs = [
            self.config(f"{tag}_m{i}", s, tag, "per_record.py", "per_record.process")
            for i, s in enumerate(sources)
        ]
        checkpoint = self.work / f"ck-{tag}"
        wall = time.time()
        started = time.perf_counter()
        group = QueryGroup(
            self.spark, self.store, tag, member_budget=self.member_budget, checkpoint=checkpoint
        )
        runs = [FunctionRun(c, store=self.store, spark=self.spark, group=group) for c in configs]
        for run in runs:
            run.start(until_drained=True)
        for run in runs:
            run.wait()
        group.close()
        seconds = time.perf_counter() - started
        return seconds, topic_total(self.store, tag), to_first_batch(checkpoint, wall)


def group_inputs(source: str, size: int) -> list[str]:
    """The input topics of a group of ``size`` members reading ``source``'s messages."""
    return [source] if size == 1 else [f"{source}-g{size}-{i}" for i in range(size)]


Medians = dict[str, tuple[float, float]]  # kind -> (seconds, seconds to the first batch)


def measure(args: argparse.Namespace) -> Medians:
    """Median seconds per kind, whole and to the first batch, from one session on ``args.master``."""
    work = Path(tempfile.mkdtemp(prefix="sparkfn-bench-fn-"))
    try:
        store = Store.open(None, work / "data")
        print(f"filling topic with {args.messages:,} messages of 100 bytes ...", flush=True)
        fill(store, "in", args.messages, args.partitions)
        fill(store, "warm", WARMUP_MESSAGES, args.partitions)
        for size in {
            int(k.removeprefix("grouped") or 1)
            for k in args.kinds
            if k != "grouped" and k.startswith("grouped")
        }:
            for source, total in (("in", args.messages), ("warm", WARMUP_MESSAGES)):
                for i, topic in enumerate(group_inputs(source, size)):
                    fill(store, topic, total // size + (i < total % size), args.partitions)
        if "native" in args.kinds:
            write_parquet(store, "in", work / "parquet-in")
            write_parquet(store, "warm", work / "parquet-warm")
        started = time.perf_counter()
        # Spark's default JIT for --jit spark (the native child), else sparkfn's session's.
        conf = {"spark.driver.defaultJavaOptions": ""} if args.jit == "spark" else None
        spark = spark_session(master=args.master, app_name="sparkfn-bench-functions", conf=conf)
        try:
            bench = Bench(spark, store, work, args.parallelism, args.member_budget)
            runs = repeat(args, bench, started)
        finally:
            spark.stop()
            store.close()
        return {
            kind: (statistics.median(r[0] for r in v), statistics.median(r[2] for r in v))
            for kind, v in runs.items()
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def repeat(args: argparse.Namespace, bench: Bench, started: float) -> dict[str, list[Run]]:
    # Warm-up on a small topic, not timed: JVM JIT, Python workers, imports.
    for kind in args.kinds:
        bench.run(kind, "warm", f"warm_{kind}")
    print(f"session start + warm-up: {time.perf_counter() - started:.1f} s", flush=True)
    runs: dict[str, list[Run]] = {kind: [] for kind in args.kinds}
    for r in range(args.repeats):
        for kind in args.kinds:  # the kinds alternate, so drift hits them alike
            run = bench.run(kind, "in", f"{kind}{r}")
            runs[kind].append(run)
            if run[1] != args.messages:
                print(
                    f"!!! {kind} run {r} wrote {run[1]:,} messages, expected {args.messages:,}",
                    flush=True,
                )
        print(
            f"repeat {r + 1}/{args.repeats}: "
            + ", ".join(
                f"{k} {v[-1][0]:.2f} s ({v[-1][2]:.2f} to batch 0)" for k, v in runs.items()
            ),
            flush=True,
        )
    return runs


def label(kind: str) -> str:
    if kind.startswith("grouped") and kind != "grouped":
        return f"per-record functions, {kind.removeprefix('grouped')} in one group"
    return LABELS[kind]


def report(args: argparse.Namespace, medians: Medians) -> None:
    rates = {kind: args.messages / seconds for kind, (seconds, _) in medians.items()}
    native = rates.get("native")
    print()
    print(
        f"messages: {args.messages:,}, repeats: {args.repeats}, master {args.master}, "
        f"parallelism {args.parallelism}, group member budget {args.member_budget:,}, medians"
    )
    for kind, rate in rates.items():
        ratio = f"  {rate / native:5.2f} x native" if native else ""
        print(f"  {label(kind):<52} {medians[kind][0]:7.2f} s {rate:>12,.0f} msg/s{ratio}")
    if "per_record" in rates and "vectorized" in rates:
        print(f"vectorized / per-record function: {rates['vectorized'] / rates['per_record']:.2f}")
    # Where the time went: the query's start, then its batches (and its stop).
    print("to the first batch / from it to the end, medians:")
    for kind, (seconds, first) in medians.items():
        rest = seconds - first
        native_rest = medians["native"][0] - medians["native"][1] if "native" in medians else None
        ratio = f"  from the first batch {native_rest / rest:5.2f} x native" if native_rest else ""
        print(f"  {kind:<12} {first:6.2f} s / {rest:5.2f} s{ratio}")


# --- 1 -> 2 cores ----------------------------------------------------------------------------


def _pinned(cores: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that keeps a child (and all it starts) on ``cores`` CPUs."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < cores:
        return None
    chosen = set(allowed[:cores])
    return lambda: os.sched_setaffinity(0, chosen)


Summary = dict[str, dict[str, float]]  # kind -> {"rate": msg/s, "after_start": s}


def scaling(args: argparse.Namespace) -> int:
    """native and per_record on each master, each master in a child process of this script.

    With ``--pin`` (the default) each child, and the JVM and Python workers it
    starts, runs on as many CPUs as its master has task slots, so ``local[1]``
    is one core; without it ``local[1]`` has one task slot while its JVM, its
    driver and its source runner use the second core too. The masters'
    children alternate for ``--rounds`` rounds: this machine's speed drifts
    over minutes, and each round's ratio compares two children run one after
    the other.
    """
    found: dict[str, list[Summary]] = {master: [] for master in SCALING_MASTERS}
    for round_no in range(1, args.rounds + 1):
        for cores, master in enumerate(SCALING_MASTERS, start=1):
            summary = _scaling_child(args, cores, master, f"round {round_no}/{args.rounds}")
            if summary is None:
                return 1
            found[master].append(summary)
    print()
    for kind in ("native", "per_record"):
        ones, twos = ([s[kind] for s in found[m]] for m in SCALING_MASTERS)
        rates = [two["rate"] / one["rate"] for one, two in zip(ones, twos, strict=True)]
        later = [
            one["after_start"] / two["after_start"] for one, two in zip(ones, twos, strict=True)
        ]
        one_rate = statistics.median(o["rate"] for o in ones)
        two_rate = statistics.median(t["rate"] for t in twos)
        print(f"{label(kind)}:")
        print(f"  local[1] {one_rate:>12,.0f} msg/s, local[2] {two_rate:>12,.0f} msg/s (medians)")
        print(f"  2-core / 1-core: {_by_round(rates)}")
        print(f"  from the first batch on (without the query's start): {_by_round(later)}")
    return 0


def _by_round(ratios: list[float]) -> str:
    """The median of ``ratios`` and each round's."""
    each = ", ".join(f"{r:.2f}" for r in ratios)
    return f"{statistics.median(ratios):.2f} (each round: {each})"


def _scaling_child(args: argparse.Namespace, cores: int, master: str, label: str) -> Summary | None:
    """Run this script on ``master`` in a child process; its summary, or None if it failed."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        f"--master={master}",
        "--kinds=native,per_record",
        f"--messages={args.messages}",
        f"--repeats={args.repeats}",
        f"--partitions={args.partitions}",
        f"--parallelism={args.parallelism}",
        "--summary-json",
    ]
    pin = _pinned(cores) if args.pin else None
    where = f"{cores} CPU(s)" if pin else "every CPU"
    print(f"--- {label}: child process on {master}, on {where} ---", flush=True)
    return _child_summary(command, master, pin)


def _child_summary(
    command: list[str], tag: str, pin: Callable[[], None] | None = None
) -> Summary | None:
    """Run ``command`` (this script with ``--summary-json``), its output shown under ``tag``;
    its summary, or None if it failed."""
    summary: Summary | None = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=pin) as child:
        for line in child.stdout or ():
            if line.startswith(SUMMARY):
                summary = json.loads(line[len(SUMMARY) :])
            else:
                print(f"  [{tag}] {line}", end="", flush=True)
    if child.returncode != 0 or summary is None:
        print(f"!!! the child {tag} failed (exit code {child.returncode})")
        return None
    return summary


def _native_child(args: argparse.Namespace) -> tuple[float, float] | None:
    """The native kind's medians (seconds, to the first batch), from a child process of
    this script whose JVM has Spark's default JIT: the baseline a user's own job gets."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        f"--master={args.master}",
        "--kinds=native",
        "--jit=spark",
        f"--messages={args.messages}",
        f"--repeats={args.repeats}",
        f"--partitions={args.partitions}",
        "--summary-json",
    ]
    print("--- native: a child process, Spark's default JIT ---", flush=True)
    summary = _child_summary(command, "native")
    if summary is None:
        return None
    seconds = args.messages / summary["native"]["rate"]
    return seconds, seconds - summary["native"]["after_start"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages (default 1M)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per kind (default 3)")
    parser.add_argument("--partitions", type=int, default=4, help="input topic partitions")
    parser.add_argument("--parallelism", type=int, default=2, help="function instances")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"kinds to run, comma-separated: {', '.join(KINDS)}",
    )
    parser.add_argument(
        "--group-size",
        type=int,
        default=1,
        help="with the grouped kind: also run N functions in one group (default 1: only one)",
    )
    parser.add_argument(
        "--member-budget",
        type=int,
        default=1_000_000,
        help="records a group member may take per batch (default 1M, a function alone's cap;"
        " a worker's default is 20,000)",
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="native and per_record on local[1] and local[2] in child processes; print the ratios",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="with --scaling: rounds of one child per master, alternating (default 2)",
    )
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --scaling: run the local[N] child on N CPUs (default on)",
    )
    parser.add_argument(
        "--jit",
        choices=("sparkfn", "spark"),
        default="sparkfn",
        help="this process's JVM: sparkfn's session's JIT (C1 only, the default) or Spark's own",
    )
    parser.add_argument(
        "--native-apart",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the native kind in a child process with Spark's own JIT (default on)",
    )
    parser.add_argument(
        "--summary-json",
        action="store_true",
        help="end with one line of msg/s per kind as JSON (what --scaling reads)",
    )
    args = parser.parse_args(argv)
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = sorted(set(args.kinds) - set(KINDS))
    if unknown or not args.kinds:
        parser.error(f"--kinds takes some of {', '.join(KINDS)}; got {args.kinds!r}")
    if args.group_size > 1 and "grouped" in args.kinds:
        args.kinds.append(f"grouped{args.group_size}")
    for name in (
        "messages",
        "repeats",
        "partitions",
        "parallelism",
        "rounds",
        "group_size",
        "member_budget",
    ):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wall = time.perf_counter()
    print(
        f"sparkfn functions benchmark: {os.cpu_count()} CPUs, load average {load_average()}",
        flush=True,
    )
    if args.scaling:
        code = scaling(args)
    else:
        apart = args.native_apart and "native" in args.kinds and args.jit == "sparkfn"
        if apart:
            args.kinds.remove("native")
        medians = measure(args) if args.kinds else {}
        if apart:
            args.kinds.insert(0, "native")
            native = _native_child(args)
            if native is None:
                return 1
            medians = {"native": native, **medians}
        report(args, medians)
        if args.summary_json:
            summary = {
                kind: {"rate": args.messages / seconds, "after_start": seconds - first}
                for kind, (seconds, first) in medians.items()
            }
            print(SUMMARY + json.dumps(summary), flush=True)
        code = 0
    print(
        f"total wall time: {time.perf_counter() - wall:.1f} s "
        f"(load average now {load_average()}; other load on the machine skews all numbers)"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
