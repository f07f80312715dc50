"""Function runtime throughput versus hand-written raw PySpark, measured in one run.

Both sides read the same topic through the sparkfn data source and write a
topic; the difference is what runs in between:

* raw:        ``mapInArrow`` with a hand-written per-record Python loop
              (``value + b"!"``), written through the plain sparkfn sink;
* sparkfn:    the exclamation function as a sparkfn function
              (``process(input) -> input + "!"``, effectively_once), through
              the function runtime: Context, per-message savepoints, stats,
              one-transaction commit;
* vectorized: the same as a VectorizedFunction (pyarrow compute).

Prints medians of ``--repeats`` runs and ratios sparkfn/raw. Never asserts.

    .venv/bin/python benchmarks/functions.py --messages 2000000 --repeats 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.localrun import LocalRun
from sparkfn.runtime.spark import spark_session
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.log import end_offsets
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

HERE = Path(__file__).resolve().parent
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


def raw_exclaim(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The baseline: the same per-record Python work, written by hand."""
    for batch in batches:
        values = batch.column("value").to_pylist()
        out = [v.decode() + "!" for v in values]
        yield pa.record_batch(
            [batch.column("key"), pa.array(out, pa.string())], names=["key", "value"]
        )


def fill(store: Store, messages: int, partitions: int) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=partitions, schema_type="string")
    producer = Producer(store, "in")
    payload = "x" * 99
    chunk = 50_000
    for first in range(0, messages, chunk):
        producer.send_batch(
            [
                Message(f"{payload}{i % 10}".encode(), key=f"k{i % 1000}")
                for i in range(first, min(messages, first + chunk))
            ]
        )


def total(store: Store, topic: str) -> int:
    return sum(end for _, end in end_offsets(store, TopicAdmin(store).get(topic)).values())


def run_raw(spark: Any, store: Store, tag: str, work: Path) -> float:
    TopicAdmin(store).create(tag, partitions=4, schema_type="string")
    opts = {"storeUrl": store.url, "dataDir": str(store.data_dir)}
    started = time.perf_counter()
    query = (
        spark.readStream.format("sparkfn")
        .options(**opts)
        .option("topic", "in")
        .option("startingOffsets", "earliest")
        .option("columns", "key,value")  # the best a hand-written job can do
        .load()
        .mapInArrow(raw_exclaim, "key string, value string")
        .writeStream.format("sparkfn")
        .options(**opts)
        .option("topic", tag)
        .option("checkpointLocation", str(work / tag))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - started


def run_function(spark: Any, store: Store, tag: str, work: Path, py: Path, classname: str) -> float:
    TopicAdmin(store).create(tag, partitions=4, schema_type="string")
    config = FunctionConfig.build(
        name=tag,
        py=str(py),
        classname=classname,
        inputs=["in"],
        output=tag,
        subscription_position="earliest",
        processing_guarantees="effectively_once",
        parallelism=2,
    )
    started = time.perf_counter()
    run = LocalRun(config, store=store, spark=spark)
    run.start(until_drained=True, checkpoint=work / tag)
    run.wait()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="sparkfn-bench-fn-"))
    try:
        store = Store.open(None, work / "data")
        (work / "per_record.py").write_text(PER_RECORD)
        (work / "vectorized.py").write_text(VECTORIZED)
        print(f"filling topic with {args.messages:,} messages of 100 bytes ...", flush=True)
        fill(store, args.messages, args.partitions)
        spark = spark_session(master="local[2]", app_name="sparkfn-bench-functions")
        # Warm-up: JVM, Python workers and imports, not timed.
        run_raw(spark, store, "warm_raw", work)
        run_function(spark, store, "warm_fn", work, work / "per_record.py", "per_record.process")
        times: dict[str, list[float]] = {"raw": [], "sparkfn": [], "vectorized": []}
        for r in range(args.repeats):
            times["raw"].append(run_raw(spark, store, f"raw{r}", work))
            times["sparkfn"].append(
                run_function(
                    spark, store, f"fn{r}", work, work / "per_record.py", "per_record.process"
                )
            )
            times["vectorized"].append(
                run_function(
                    spark, store, f"vec{r}", work, work / "vectorized.py", "vectorized.Exclaim"
                )
            )
            for name, tag in (("raw", f"raw{r}"), ("sparkfn", f"fn{r}"), ("vectorized", f"vec{r}")):
                produced = total(store, tag)
                if produced != args.messages:
                    print(
                        f"warning: {name} run {r} wrote {produced} messages, expected {args.messages}"
                    )
            print(
                f"repeat {r}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()),
                flush=True,
            )
        medians = {k: statistics.median(v) for k, v in times.items()}
        rates = {k: args.messages / v for k, v in medians.items()}
        print()
        print(f"messages: {args.messages:,}, repeats: {args.repeats}, master local[2], medians")
        for name in ("raw", "sparkfn", "vectorized"):
            print(f"  {name:<11} {medians[name]:7.2f} s  {rates[name]:>12,.0f} msg/s")
        print(f"per-record sparkfn / raw mapInArrow: {rates['sparkfn'] / rates['raw']:.2f}")
        print(f"vectorized sparkfn / raw mapInArrow: {rates['vectorized'] / rates['raw']:.2f}")
        spark.stop()
        store.close()
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
