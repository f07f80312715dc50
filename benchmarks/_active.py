"""Many functions active at a low rate each: ``density.py --active-rate``'s feeder and measure.

The feeder is a process of its own (``python _active.py feed ...``), so its
CPU can be told apart from the worker's: it sends ``rate`` msg/s into each
of ``functions`` input topics (``fn-<i>-in``) for ``seconds``, every
function on its own phase of a ``tick`` (one ``send_batch`` per function
and tick), and prints what it sent as JSON. Latency is measured as
``latency.py`` does, from publish times (the output's commit minus the
input's append), so batching the sends does not bias it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _common import publish_times, value_of

from sparkfn.store.store import Store
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

TICK = 0.5


def feed(
    store: Store, functions: int, rate: float, seconds: float, tag: str, hot: float = 0.0
) -> dict[str, float]:
    """Send ``rate`` msg/s into each function's input for ``seconds`` (``hot`` msg/s into
    ``fn-0``'s, if given); what was sent."""
    producers = [Producer(store, f"fn-{i}-in") for i in range(functions)]
    sent = [0] * functions
    rates = [hot if i == 0 and hot > 0 else rate for i in range(functions)]
    totals = [round(r * seconds) for r in rates]
    started = time.monotonic()
    max_late = 0.0
    ticks = 0
    while any(n < t for n, t in zip(sent, totals, strict=True)):
        for i, producer in enumerate(producers):
            due_at = started + ticks * TICK + TICK * i / functions
            now = time.monotonic()
            if due_at > now:
                time.sleep(due_at - now)
            else:
                max_late = max(max_late, now - due_at)
            due = min(totals[i], int((time.monotonic() - started) * rates[i]) + 1)
            if due > sent[i]:
                producer.send_batch(
                    [Message(value_of(f"{tag}-{i}", k)) for k in range(sent[i], due)]
                )
                sent[i] = due
        ticks += 1
    return {
        "messages": float(sum(sent)),
        "seconds": time.monotonic() - started,
        "max_late": max_late,
    }


@dataclass(frozen=True)
class ActiveResult:
    """What an active window came to, over every function."""

    sent: int
    received: int
    repeated: int
    seconds: np.ndarray  # latency per message
    worst_p99: float  # the highest p99 of any one function
    feeder: dict[str, float]
    first: np.ndarray | None = None  # fn-0's latencies alone (the hot function, if any)
    others_worst_p99: float = 0.0  # the highest p99 of any function but fn-0

    def others(self) -> np.ndarray:
        """The latencies of every function but fn-0 (those beside a hot one)."""
        n = 0 if self.first is None else self.first.size
        return self.seconds[n:]

    def line(self) -> str:
        ms = {
            q: float(np.percentile(self.seconds, q)) * 1000 if self.seconds.size else float("nan")
            for q in (50, 90, 99, 100)
        }
        return (
            f"count {self.received:,}/{self.sent:,} (lost {self.sent - self.received:,}, "
            f"repeated {self.repeated:,}), p50 {ms[50]:,.0f} ms, p90 {ms[90]:,.0f} ms, "
            f"p99 {ms[99]:,.0f} ms, max {ms[100]:,.0f} ms; worst function's p99 "
            f"{self.worst_p99 * 1000:,.0f} ms; the feeder fell {self.feeder['max_late']:.2f} s "
            "behind at worst"
        )


def start_feeder(
    store: Store, functions: int, rate: float, seconds: float, tag: str, hot: float = 0.0
) -> subprocess.Popen[str]:
    """The feeder, started as a process of its own."""
    return subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__)),
            "feed",
            "--store-url",
            store.url,
            "--data-dir",
            str(store.data_dir),
            "--functions",
            str(functions),
            "--rate",
            str(rate),
            "--seconds",
            str(seconds),
            "--tag",
            tag,
            "--hot",
            str(hot),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_outputs(store: Store, functions: int, expected: int, timeout: float) -> None:
    """Until every function's output holds ``expected`` messages, or ``timeout`` s."""
    from _common import topic_total

    deadline = time.monotonic() + timeout
    pending = set(range(functions))
    while pending and time.monotonic() < deadline:
        pending = {i for i in pending if topic_total(store, f"fn-{i}-out") < expected}
        if pending:
            time.sleep(0.5)


def measure(store: Store, functions: int, tag: str, feeder: dict[str, float]) -> ActiveResult:
    """Latency, losses and repeats over every function's input and output."""
    latencies: list[np.ndarray] = []
    sent = received = repeated = 0
    worst = others_worst = 0.0
    first: np.ndarray | None = None
    for i in range(functions):
        prefix = f"{tag}-{i}-".encode()
        inputs, _ = publish_times(store, f"fn-{i}-in", prefix)
        outputs, again = publish_times(store, f"fn-{i}-out", prefix)
        matched = (
            np.asarray(
                [outputs[v] - t for v, t in inputs.items() if v in outputs], dtype=np.float64
            )
            / 1e6
        )
        if i == 0:
            first = matched
        sent += len(inputs)
        received += int(matched.size)
        repeated += again
        if matched.size:
            worst = max(worst, float(np.percentile(matched, 99)))
            if i > 0:
                others_worst = max(others_worst, float(np.percentile(matched, 99)))
            latencies.append(matched)
    joined = np.concatenate(latencies) if latencies else np.asarray([], dtype=np.float64)
    return ActiveResult(sent, received, repeated, joined, worst, feeder, first, others_worst)


def main() -> int:
    parser = argparse.ArgumentParser(description="the active-mode feeder of density.py")
    parser.add_argument("command", choices=["feed"])
    parser.add_argument("--store-url", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--functions", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--hot", type=float, default=0.0)
    args = parser.parse_args()
    store = Store.open(args.store_url, args.data_dir)
    try:
        print(
            json.dumps(feed(store, args.functions, args.rate, args.seconds, args.tag, args.hot)),
            flush=True,
        )
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
