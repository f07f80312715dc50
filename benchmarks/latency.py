"""End-to-end latency of a function at steady input rates.

An identity function (``effectively_once``, the default trigger) runs under
``FunctionRun``, the supervisor ``localrun`` and the worker use, from one topic
to another. For each rate a producer sends on a schedule (what is due every
few milliseconds, in one ``send_batch``) for a warm-up, left out of the
figures, and then for the timed window. Latency per message is the output's
publish time minus the input's, matched by value after the run. Prints p50,
p90, p99 and max per rate, and the count of messages that came out, which
must equal the count sent. Never asserts.

    .venv/bin/python benchmarks/latency.py --rates 1000,10000 --seconds 60
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
from _common import IDENTITY, VALUE_SIZE, Latency, load_average, measure_latency

from sparkfn.api.lifecycle import StopMode
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.spark.session import spark_session
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin

# Progress reports the session keeps: every trigger of a window.
PROGRESS_KEPT = 5000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rates", default="1000,10000", help="input rates in msg/s, comma-separated"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="timed window per rate")
    parser.add_argument(
        "--warmup-seconds", type=float, default=5.0, help="untimed sending before each window"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--partitions", type=int, default=1, help="input topic partitions")
    parser.add_argument("--parallelism", type=int, default=1, help="function instances")
    parser.add_argument(
        "--wait-timeout",
        type=float,
        default=300.0,
        help="how long to wait for the outputs after sending (s)",
    )
    args = parser.parse_args(argv)
    try:
        args.rate_list = [float(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        parser.error(f"--rates must be numbers separated by commas; got {args.rates!r}")
    if not args.rate_list or min(args.rate_list) <= 0:
        parser.error("--rates must hold at least one positive rate")
    for name in ("seconds", "partitions", "parallelism", "wait_timeout"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.warmup_seconds < 0:
        parser.error("--warmup-seconds must not be negative")
    return args


def batch_summary(run: FunctionRun, since: datetime) -> str:
    """The function query's micro-batches begun since ``since``, from Spark's progress reports.

    The session keeps the last :data:`PROGRESS_KEPT` reports
    (``spark.sql.streaming.numRecentProgressUpdates``; Spark's default is 100).
    """
    progress = run.query.recentProgress if run.query is not None else []
    busy = [
        p for p in progress if p["numInputRows"] and datetime.fromisoformat(p["timestamp"]) >= since
    ]
    if not busy:
        return "no micro-batch with input in Spark's recent progress"
    trigger = [p["durationMs"].get("triggerExecution", 0) for p in busy]
    parts = sorted({k for p in busy for k in p["durationMs"] if k != "triggerExecution"})
    medians = ", ".join(
        f"{k} {statistics.median(p['durationMs'].get(k, 0) for p in busy):,.0f}" for k in parts
    )
    slowest = max(busy, key=lambda p: p["durationMs"].get("triggerExecution", 0))
    slow_parts = ", ".join(f"{k} {slowest['durationMs'].get(k, 0):,}" for k in parts)
    # numInputRows counts the source's rows: one per task, since the function runs in them.
    return (
        f"{len(busy)} micro-batches with input in the window: triggerExecution median "
        f"{statistics.median(trigger):,.0f} ms, p99 {float(np.percentile(trigger, 99)):,.0f} "
        f"(max {max(trigger):,.0f}); medians (ms): {medians}"
        f"\n  slowest, batch {slowest['batchId']} at {slowest['timestamp']} (ms): {slow_parts}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wall = time.perf_counter()
    print(
        f"sparkfn latency benchmark: identity function, effectively_once, default trigger, "
        f"{VALUE_SIZE}-byte values, rates {args.rates} msg/s, {args.seconds:g} s each "
        f"(+{args.warmup_seconds:g} s warm-up), {args.partitions} partition(s), parallelism "
        f"{args.parallelism}, Spark {args.master}, {os.cpu_count()} CPUs, "
        f"load average {load_average()}",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="sparkfn-bench-latency-"))
    results: list[Latency] = []
    try:
        store = Store.open(None, work / "data")
        admin = TopicAdmin(store)
        admin.create("in", partitions=args.partitions, schema_type="string")
        admin.create("out", partitions=args.partitions, schema_type="string")
        (work / "identity.py").write_text(IDENTITY)
        config = FunctionConfig.build(
            name="identity",
            py=str(work / "identity.py"),
            inputs=["in"],
            output="out",
            subscription_position="earliest",
            processing_guarantees="effectively_once",
            parallelism=args.parallelism,
        )
        started = time.perf_counter()
        # Every trigger's progress kept (Spark keeps 100: at 1 k msg/s, about 10 s of a window).
        keep = {"spark.sql.streaming.numRecentProgressUpdates": str(PROGRESS_KEPT)}
        spark = spark_session(master=args.master, app_name="sparkfn-bench-latency", conf=keep)
        run = FunctionRun(config, store=store, spark=spark)
        try:
            run.start(checkpoint=work / "checkpoint")
            print(f"session and query started in {time.perf_counter() - started:.1f} s", flush=True)
            for rate in args.rate_list:
                result = measure_latency(
                    store,
                    "in",
                    "out",
                    rate,
                    args.seconds,
                    warmup_seconds=args.warmup_seconds,
                    wait_timeout=args.wait_timeout,
                )
                results.append(result)
                print(result.line(), flush=True)
                print(f"  {batch_summary(run, result.window_start)}", flush=True)
                for problem in result.problems():
                    print(problem, flush=True)
        finally:
            run.stop(StopMode.CANCEL, timeout=120)
            spark.stop()
            store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(
        f"{'rate msg/s':>10}  {'count':>15}  {'p50 ms':>8}  {'p90 ms':>8}  {'p99 ms':>8}  {'max ms':>8}"
    )
    for r in results:
        count = f"{r.received:,}/{r.sent.messages:,}"
        print(
            f"{r.rate:>10,.0f}  {count:>15}  {r.percentile(50) * 1000:>8,.0f}  "
            f"{r.percentile(90) * 1000:>8,.0f}  {r.percentile(99) * 1000:>8,.0f}  "
            f"{r.percentile(100) * 1000:>8,.0f}"
        )
    for r in results:
        for problem in r.problems():
            print(problem)
    print(
        f"total wall time: {time.perf_counter() - wall:.1f} s "
        f"(load average now {load_average()}; other load on the machine skews all numbers)"
    )
    return 0 if all(r.complete for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
