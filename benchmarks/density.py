"""How many idle functions one worker process holds, and what they cost.

Starts ``--functions`` identity functions (``effectively_once``, default
trigger, one input and one output topic each) the way a worker does: one
:class:`~sparkfn.worker.service.Worker` in this process, one SparkSession, a
FAIR scheduler pool per function. With every input idle, samples the whole
process tree (this process, the JVM, Spark's Python daemon and workers, and
any data-source runner processes) from ``/proc`` over ``--idle-seconds``:
CPU as % of one core, RSS summed over the processes, process count, and
what each function adds to the session sampled alone before them. A
worker parks the query of a function whose input has been quiet for
``--park-idle-after`` seconds (its default, 30 s; 0: never), so the script
first waits until every query is parked (or the settle time is up) and
says how many Spark queries are still active. Then it feeds one function's
input at ``--load-rate``: first a ``--wake-seconds`` window that starts
from the parked query (the wake-up is in it), then the steady
``--load-seconds`` window, each printed as ``latency.py`` does, while the
others stay idle. Stops every function (suspend) and the session at the
end. Never asserts.

    .venv/bin/python benchmarks/density.py --functions 50 --idle-seconds 30
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import numpy as np
from _active import measure, start_feeder, wait_outputs
from _common import (
    CLOCK_TICKS,
    IDENTITY,
    TreeUsage,
    bench_store,
    command_label,
    load_average,
    measure_latency,
    process_tree,
    read_proc,
    ticks_named,
    watch_tree,
)

from sparkfn.api.lifecycle import StopMode
from sparkfn.config.function import FunctionConfig
from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--functions", type=int, default=50, help="functions started (default 50)")
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=10.0,
        help="wait after the last start before sampling (default 10)",
    )
    parser.add_argument(
        "--baseline-seconds",
        type=float,
        default=10.0,
        help="sample the session alone, before any function, this long (0: skip)",
    )
    parser.add_argument(
        "--park-idle-after",
        type=float,
        default=None,
        help="the worker's park_idle_after in seconds (default: the worker's default; 0: never)",
    )
    parser.add_argument(
        "--wake-seconds",
        type=float,
        default=10.0,
        help="timed load window that starts from a parked query (0: skip)",
    )
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="idle sampling window")
    parser.add_argument("--load-rate", type=float, default=1000.0, help="msg/s into one function")
    parser.add_argument("--load-seconds", type=float, default=30.0, help="timed load window")
    parser.add_argument(
        "--warmup-seconds", type=float, default=5.0, help="untimed load before the window"
    )
    parser.add_argument(
        "--active-rate",
        type=float,
        default=0.0,
        help="active mode: msg/s into EVERY function at once (0: off, the idle mode)",
    )
    parser.add_argument("--active-seconds", type=float, default=30.0, help="active window (s)")
    parser.add_argument(
        "--active-warmup-seconds",
        type=float,
        default=20.0,
        help="active mode: the same load, untimed, just before the window, so that the window "
        "sees the steady state (the JVM's JIT compiles the batch's code in the first seconds)",
    )
    parser.add_argument(
        "--hot-rate",
        type=float,
        default=0.0,
        help="active mode: msg/s into fn-0 instead of --active-rate (a hot function beside them)",
    )
    parser.add_argument(
        "--groups",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the functions in the worker's query group (default) or a query each",
    )
    parser.add_argument(
        "--group-trigger-interval",
        type=float,
        default=None,
        help="the worker's group_trigger_interval in seconds (default: the worker's default)",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--store-url",
        default=None,
        help="store URL (default: SQLite in a temp dir; PostgreSQL: a fresh schema, dropped after)",
    )
    parser.add_argument(
        "--wait-timeout", type=float, default=300.0, help="wait for the load's outputs (s)"
    )
    args = parser.parse_args(argv)
    for name in ("functions", "idle_seconds", "load_rate", "load_seconds", "wait_timeout"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    never_negative = ("settle_seconds", "warmup_seconds", "active_warmup_seconds")
    for name in (*never_negative, "baseline_seconds", "wake_seconds"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative")
    return args


def start_functions(worker: Worker, count: int, py: Path) -> float:
    """Create ``count`` identity functions on the worker; seconds it took."""
    admin = TopicAdmin(worker.open_store())
    started = time.perf_counter()
    for i in range(count):
        admin.create(f"fn-{i}-in", schema_type="string")
        admin.create(f"fn-{i}-out", schema_type="string")
        config = FunctionConfig.build(
            name=f"fn-{i}",
            py=str(py),
            inputs=[f"fn-{i}-in"],
            output=f"fn-{i}-out",
            processing_guarantees="effectively_once",
        )
        worker.create(config, package_digest=None, who="bench")
        if (i + 1) % 10 == 0 or i + 1 == count:
            print(
                f"  {i + 1} function(s) started, {time.perf_counter() - started:.1f} s, "
                f"{len(process_tree())} processes in the tree",
                flush=True,
            )
    return time.perf_counter() - started


def settle_parked(worker: Worker, settle_seconds: float, park_after: float) -> None:
    """Wait ``settle_seconds``; with parking on, then until every query is parked and the
    process tree has kept the same processes for 10 s (Spark ends idle Python workers
    a minute after their last task): a process ending in the sampling window would
    take the CPU it used before the window out of the sum. Prints what it waited for."""
    started = time.perf_counter()
    time.sleep(settle_seconds)
    if park_after > 0:
        deadline = started + settle_seconds + park_after + 120.0
        while worker.spark.streams.active and time.perf_counter() < deadline:
            time.sleep(1.0)
        pids = {p.pid for p in process_tree()}
        while time.perf_counter() < deadline:
            time.sleep(10.0)
            now = {p.pid for p in process_tree()}
            if now == pids:
                break
            pids = now
    print(
        f"settled after {time.perf_counter() - started:.1f} s: "
        f"{len(worker.spark.streams.active)} Spark queries active "
        f"(park_idle_after {park_after:g} s), {len(process_tree())} processes in the tree",
        flush=True,
    )


def per_function(idle: TreeUsage, baseline: TreeUsage, functions: int) -> str:
    """What each idle function adds to the session alone."""
    cpu = (idle.cpu_percent - baseline.cpu_percent) / functions
    rss = (idle.rss_last - baseline.rss_last) / functions / 1024**2
    procs = (sum(idle.names.values()) - sum(baseline.names.values())) / functions
    return (
        f"per idle function, above the session alone: CPU {cpu:.1f} % of one core, "
        f"RSS {rss:,.0f} MiB, {procs:.1f} processes"
    )


def run_active(worker: Worker, args: argparse.Namespace) -> bool:
    """Every function fed at ``--active-rate`` for ``--active-seconds``: the tree's cost
    (the feeder's own CPU taken out) and the latency over all functions."""
    store = worker.open_store()
    tag = f"a{time.monotonic_ns() % 10**9}"
    print(
        f"active: {args.active_rate:g} msg/s into each of {args.functions} functions "
        f"({args.active_rate * args.functions:,.0f} msg/s in all) for {args.active_seconds:g} s ...",
        flush=True,
    )
    warm = args.active_warmup_seconds
    if warm > 0:  # untimed, by a tag of its own; the timed feed starts as it ends
        print(f"  active: {warm:g} s of the same load first, untimed (warm-up)", flush=True)
        warming = start_feeder(
            store, args.functions, args.active_rate, warm, f"w{tag}", args.hot_rate
        )
        warming.communicate(timeout=warm + args.wait_timeout)
    feeder = start_feeder(
        store, args.functions, args.active_rate, args.active_seconds, tag, args.hot_rate
    )
    before = read_proc(feeder.pid)
    usage = watch_tree(args.active_seconds)
    after = read_proc(feeder.pid)
    feeder_cpu = 0.0
    if before is not None and after is not None:
        feeder_cpu = 100.0 * (after.ticks - before.ticks) / CLOCK_TICKS / usage.seconds
    out, _ = feeder.communicate(timeout=args.wait_timeout)
    sent = json.loads(out.strip().splitlines()[-1])
    expected = round(args.active_rate * args.active_seconds) + round(args.active_rate * warm)
    wait_outputs(store, args.functions, expected, args.wait_timeout)
    if args.hot_rate:
        hot_expected = round(args.hot_rate * args.active_seconds) + round(args.hot_rate * warm)
        wait_outputs(store, 1, hot_expected, args.wait_timeout)
    result = measure(store, args.functions, tag, sent)
    print(
        f"  active: whole tree CPU {usage.cpu_percent - feeder_cpu:.1f} % of one core "
        f"(the feeder's own {feeder_cpu:.1f} % taken out)",
        flush=True,
    )
    for line in usage.lines()[1:]:
        print(f"  active {line}", flush=True)
    print(f"  active: {result.line()}", flush=True)
    if args.hot_rate and result.first is not None and result.first.size:
        hot = result.first
        print(
            f"  active: the hot function fn-0 at {args.hot_rate:,.0f} msg/s: "
            f"{hot.size:,} out, p50 {np.percentile(hot, 50) * 1000:,.0f} ms, "
            f"p99 {np.percentile(hot, 99) * 1000:,.0f} ms; its output rate over the window "
            f"{hot.size / args.active_seconds:,.0f} msg/s",
            flush=True,
        )
        rest = result.others()
        if rest.size:
            print(
                f"  active: the {args.functions - 1} others beside it: p50 "
                f"{np.percentile(rest, 50) * 1000:,.0f} ms, p99 "
                f"{np.percentile(rest, 99) * 1000:,.0f} ms, worst one's p99 "
                f"{result.others_worst_p99 * 1000:,.0f} ms",
                flush=True,
            )
    print(f"  active: {len(worker.spark.streams.active)} Spark queries active", flush=True)
    for query in worker.spark.streams.active:
        progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
        if not progress:
            continue
        steps = sorted({k for p in progress for k in p.get("durationMs", {})})
        medians = {
            k: float(np.median([p["durationMs"].get(k, 0) for p in progress])) for k in steps
        }
        print(
            f"  active: query {query.name}: {len(progress)} batches with input in its recent "
            "progress; median ms per step: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in medians.items()),
            flush=True,
        )
    return result.received == result.sent and result.repeated == 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wall = time.perf_counter()
    print(
        f"sparkfn density benchmark: {args.functions} identity functions on one SparkSession "
        f"({args.master}) in one worker process, {os.cpu_count()} CPUs, "
        f"load average {load_average()}",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="sparkfn-bench-density-"))
    stores = ExitStack()
    store, backend = stores.enter_context(bench_store(args.store_url, work / "data"))
    print(f"store: {backend}", flush=True)
    settings = WorkerSettings.resolve(
        data_dir=work / "data",
        store_url=store.url,
        spark_master=args.master,
        worker_id="bench",
        park_idle_after=args.park_idle_after,
        groups=args.groups,
        group_trigger_interval=args.group_trigger_interval,
    )
    worker = Worker(settings)
    ok = True
    try:
        worker.open()
        (work / "identity.py").write_text(IDENTITY)
        started = time.perf_counter()
        worker.restore()  # starts the session; the store holds no function yet
        if worker.spark_error is not None:
            print(f"!!! Spark did not start: {worker.spark_error}")
            return 1
        print(f"session started in {time.perf_counter() - started:.1f} s", flush=True)
        if worker.warming is not None:  # its first tasks, not part of the session's idle cost
            worker.warming.join()
            print(f"session warmed up after {time.perf_counter() - started:.1f} s", flush=True)
        baseline = None
        if args.baseline_seconds > 0:
            baseline = watch_tree(args.baseline_seconds)
            for line in baseline.lines():
                print(f"  session alone: {line}", flush=True)
        seconds = start_functions(worker, args.functions, work / "identity.py")
        print(
            f"{args.functions} functions started in {seconds:.1f} s "
            f"({seconds / args.functions:.2f} s each); settling {args.settle_seconds:g} s",
            flush=True,
        )
        # A group's members never park (an idle member costs its group nothing).
        settle_parked(worker, args.settle_seconds, 0 if args.groups else settings.park_idle_after)
        running = len(worker.running())
        if running != args.functions:
            print(f"!!! only {running} of {args.functions} functions are running", flush=True)
            ok = False

        if args.active_rate > 0:
            active = run_active(worker, args)
            ok = ok and active
        print(f"idle: sampling the process tree for {args.idle_seconds:g} s ...", flush=True)
        server_ticks = ticks_named("postgres")
        idle = watch_tree(args.idle_seconds)
        server = 100.0 * (ticks_named("postgres") - server_ticks) / CLOCK_TICKS / idle.seconds
        for line in idle.lines():
            print(f"  idle {line}", flush=True)
        if backend != "sqlite":
            print(
                f"  idle: the PostgreSQL server, outside the tree (every client of the machine): "
                f"CPU {server:.1f} % of one core",
                flush=True,
            )
        if baseline is not None:
            print(f"  {per_function(idle, baseline, args.functions)}", flush=True)

        wake = None
        if args.wake_seconds > 0:
            print(
                f"wake-up: {args.load_rate:,.0f} msg/s into fn-0 for {args.wake_seconds:g} s, "
                f"from {'its parked query' if settings.park_idle_after else 'a running query'}",
                flush=True,
            )
            wake = measure_latency(
                worker.open_store(),
                "fn-0-in",
                "fn-0-out",
                args.load_rate,
                args.wake_seconds,
                warmup_seconds=0,
                wait_timeout=args.wait_timeout,
            )
            print(f"  {wake.line()}", flush=True)
            for problem in wake.problems():
                print(problem, flush=True)
            ok = ok and wake.complete
        print(
            f"load: {args.load_rate:,.0f} msg/s into fn-0 for {args.load_seconds:g} s "
            f"(+{args.warmup_seconds:g} s warm-up), the others idle ...",
            flush=True,
        )
        latency = measure_latency(
            worker.open_store(),
            "fn-0-in",
            "fn-0-out",
            args.load_rate,
            args.load_seconds,
            warmup_seconds=args.warmup_seconds,
            wait_timeout=args.wait_timeout,
        )
        print(f"  {latency.line()}", flush=True)
        for problem in latency.problems():
            print(problem, flush=True)
        ok = ok and latency.complete
    finally:
        stopping = time.perf_counter()
        spark = worker.spark_if_started
        worker.shutdown(StopMode.SUSPEND)
        if spark is not None:
            spark.stop()
        left = Counter(command_label(p) for p in process_tree())
        print(
            f"stopped every function and the session in {time.perf_counter() - stopping:.1f} s; "
            f"left in the tree: {', '.join(f'{n} {label}' for label, n in left.most_common())}",
            flush=True,
        )
        stores.close()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"functions: {args.functions} started in {seconds:.1f} s, {running} running")
    for line in idle.lines():
        print(f"idle {line}")
    if backend != "sqlite":
        print(f"idle: PostgreSQL server (outside the tree) CPU {server:.1f} % of one core")
    if baseline is not None:
        print(per_function(idle, baseline, args.functions))
    if wake is not None:
        print(
            f"wake-up window from parked ({args.wake_seconds:g} s): count "
            f"{wake.received:,}/{wake.sent.messages:,}, p50 {wake.percentile(50) * 1000:,.0f} ms, "
            f"p99 {wake.percentile(99) * 1000:,.0f} ms, max {wake.percentile(100) * 1000:,.0f} ms"
        )
    print(
        f"load into one function: count {latency.received:,}/{latency.sent.messages:,}, "
        f"p50 {latency.percentile(50) * 1000:,.0f} ms, p99 {latency.percentile(99) * 1000:,.0f} ms"
    )
    print(
        f"total wall time: {time.perf_counter() - wall:.1f} s "
        f"(load average now {load_average()}; other load on the machine skews all numbers)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
