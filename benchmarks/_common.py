"""What the latency and density benchmarks share: a paced producer, latency from
publish times, and CPU and memory of this process's tree read from ``/proc``.

Not a benchmark itself; ``latency.py`` and ``density.py`` import it from the
same folder.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import numpy as np
import pyarrow as pa

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.log import end_offsets
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.reading import read_range

VALUE_SIZE = 100
# The function every latency measurement runs: the output value is the input's.
IDENTITY = """
def process(input):
    return input
"""


def load_average() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def topic_total(store: Store, topic: str) -> int:
    """Messages in ``topic`` now, over every partition."""
    info = TopicAdmin(store).get(topic)
    return sum(end - start for start, end in end_offsets(store, info).values())


# --- a producer on a schedule ------------------------------------------------------


def value_of(tag: str, seq: int) -> bytes:
    """A unique 100-byte value: the tag and a sequence number, padded."""
    return f"{tag}-{seq:010d}-".ljust(VALUE_SIZE, "x").encode()


@dataclass(frozen=True)
class Sent:
    """What :func:`send_paced` did."""

    messages: int
    seconds: float
    calls: int
    max_late: float  # how far the producer fell behind its schedule at worst, s

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else float("nan")


def send_paced(
    producer: Producer, rate: float, seconds: float, tag: str, tick: float = 0.005
) -> Sent:
    """Send ``rate * seconds`` messages evenly over ``seconds``.

    Every ``tick`` seconds the messages that are due by then go in one
    ``send_batch`` (one store transaction), so the pace holds at rates one
    transaction per message could not reach. A send that takes longer than a
    tick makes the next one larger, not the schedule longer.
    """
    total = round(rate * seconds)
    sent = calls = 0
    max_late = 0.0
    started = time.monotonic()
    while sent < total:
        now = time.monotonic()
        due = min(total, int((now - started) * rate) + 1)  # message i is due at i / rate
        if due > sent:
            max_late = max(max_late, now - (started + sent / rate))
            producer.send_batch([Message(value_of(tag, i)) for i in range(sent, due)])
            sent = due
            calls += 1
            continue
        # Wake at the next tick, or later if the next message is not due by then.
        next_tick = started + (int((now - started) / tick) + 1) * tick
        time.sleep(max(0.0, max(next_tick, started + sent / rate) - now))
    return Sent(sent, time.monotonic() - started, calls, max_late)


def wait_for_total(store: Store, topic: str, expected: int, timeout: float) -> int:
    """Poll until ``topic`` holds ``expected`` messages or ``timeout`` s passed; the count."""
    deadline = time.monotonic() + timeout
    while True:
        count = topic_total(store, topic)
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


# --- latency from publish times ------------------------------------------------------


def publish_times(store: Store, topic: str, prefix: bytes) -> tuple[dict[bytes, int], int]:
    """``{value: first publish time in µs}`` of ``topic``'s messages starting with
    ``prefix``, and how many of them repeated a value already seen."""
    info = TopicAdmin(store).get(topic)
    times: dict[bytes, int] = {}
    repeats = 0
    for part, (start, end) in end_offsets(store, info).items():
        for batch in read_range(store, info, part, start, end):
            values = batch.column("value").to_pylist()
            stamps = batch.column("publish_time").cast(pa.int64()).to_pylist()
            for value, stamp in zip(values, stamps, strict=True):
                if value is None or not value.startswith(prefix):
                    continue
                if value in times:
                    repeats += 1
                    times[value] = min(times[value], stamp)
                else:
                    times[value] = stamp
    return times, repeats


@dataclass
class Latency:
    """One steady-rate run: what was sent, what came out, and how late."""

    rate: float
    sent: Sent
    received: int  # distinct inputs whose output was found
    duplicates: int  # outputs beyond the first for one input
    seconds: np.ndarray  # output publish time - input publish time, per message
    window_start: datetime  # when the timed window's first message was sent (UTC)

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.seconds, q)) if self.seconds.size else float("nan")

    @property
    def complete(self) -> bool:
        return self.received == self.sent.messages and self.duplicates == 0

    def line(self) -> str:
        ms = {q: self.percentile(q) * 1000 for q in (50, 90, 99, 100)}
        return (
            f"rate {self.rate:>8,.0f} msg/s (sent at {self.sent.rate:,.0f}, "
            f"{self.sent.calls:,} send_batch calls, at worst {self.sent.max_late * 1000:.0f} ms "
            f"behind schedule): count {self.received:,}/{self.sent.messages:,}  "
            f"p50 {ms[50]:,.0f} ms  p90 {ms[90]:,.0f} ms  p99 {ms[99]:,.0f} ms  "
            f"max {ms[100]:,.0f} ms"
        )

    def problems(self) -> list[str]:
        """What makes the count wrong, loudly worded; empty when every message came out once."""
        found = []
        if self.received != self.sent.messages:
            found.append(
                f"!!! COUNT MISMATCH at {self.rate:,.0f} msg/s: {self.received:,} of "
                f"{self.sent.messages:,} sent messages came out "
                f"({self.sent.messages - self.received:,} missing)"
            )
        if self.duplicates:
            found.append(
                f"!!! DUPLICATES at {self.rate:,.0f} msg/s: {self.duplicates:,} outputs repeat an "
                "input already output"
            )
        return found


def measure_latency(
    store: Store,
    source: str,
    target: str,
    rate: float,
    seconds: float,
    *,
    warmup_seconds: float,
    wait_timeout: float,
) -> Latency:
    """Feed ``source`` at ``rate`` for ``seconds`` and measure each message's trip to ``target``.

    A function must be running from ``source`` to ``target`` and copying
    values unchanged. First ``warmup_seconds`` at the same rate, waited for
    and left out of the statistics (the first batch, JIT, worker start);
    then the timed window, then up to ``wait_timeout`` s for its last
    outputs. Latency is the output's publish time (set in the function's
    commit) minus the input's (set by the producer's append), matched by value.
    """
    tag = f"r{round(rate)}-{time.monotonic_ns() % 10**9}"
    with Producer(store, source) as producer:
        if warmup_seconds > 0:
            before = topic_total(store, target)
            warm = send_paced(producer, rate, warmup_seconds, f"{tag}w")
            got = wait_for_total(store, target, before + warm.messages, wait_timeout)
            if got < before + warm.messages:
                print(
                    f"!!! warm-up: {got - before:,} of {warm.messages:,} messages came out "
                    f"within {wait_timeout:.0f} s",
                    flush=True,
                )
        before = topic_total(store, target)
        window_start = datetime.now(UTC)
        sent = send_paced(producer, rate, seconds, f"{tag}m")
    wait_for_total(store, target, before + sent.messages, wait_timeout)
    prefix = f"{tag}m-".encode()
    inputs, _ = publish_times(store, source, prefix)
    outputs, duplicates = publish_times(store, target, prefix)
    matched = [outputs[v] - t for v, t in inputs.items() if v in outputs]
    return Latency(
        rate=rate,
        sent=sent,
        received=len(matched),
        duplicates=duplicates,
        seconds=np.asarray(matched, dtype=np.float64) / 1e6,
        window_start=window_start,
    )


# --- the process tree, from /proc -----------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Proc:
    """One process as ``/proc/<pid>/stat`` shows it."""

    pid: int
    ppid: int
    name: str
    ticks: int  # CPU of the process and of its children it has waited for
    rss: int  # bytes


def read_proc(pid: int) -> Proc | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # ended between listing and reading
        return None
    # The name is in parentheses and may hold spaces or parentheses itself.
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 of proc(5): state; ppid is 4, utime..cstime 14..17, rss 24.
    ticks = sum(int(f) for f in fields[11:15])
    return Proc(pid, int(fields[1]), name, ticks, int(fields[21]) * PAGE_SIZE)


def _all_procs() -> list[Proc]:
    """Every process on the machine (those that ended while being read left out)."""
    return [p for p in (read_proc(int(d)) for d in os.listdir("/proc") if d.isdigit()) if p]


def ticks_named(name: str) -> int:
    """CPU ticks of every process on the machine called ``name`` (and of children it reaped)."""
    return sum(p.ticks for p in _all_procs() if p.name == name)


def process_tree(root: int | None = None) -> list[Proc]:
    """``root`` (this process by default) and every descendant: JVM, Python workers, ..."""
    root = os.getpid() if root is None else root
    procs = _all_procs()
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    mine = [p for p in procs if p.pid == root]
    todo = list(mine)
    while todo:
        kids = children.get(todo.pop().pid, [])
        mine.extend(kids)
        todo.extend(kids)
    return mine


def pss_bytes(procs: list[Proc]) -> int | None:
    """Proportional set size summed (shared pages split between their users), if readable."""
    total = None
    for p in procs:
        try:
            text = Path(f"/proc/{p.pid}/smaps_rollup").read_text()
        except OSError:  # ended since, or no smaps_rollup on this kernel
            continue
        for line in text.splitlines():
            if line.startswith("Pss:"):
                total = (total or 0) + int(line.split()[1]) * 1024
                break
    return total


def command_label(p: Proc) -> str:
    """The process's name, and for ``python -m x`` the module: what kind of process it is."""
    try:
        args = Path(f"/proc/{p.pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return p.name
    if "-m" in args[:-1]:
        return f"{p.name} -m {args[args.index('-m') + 1]}"
    return p.name


@dataclass
class TreeUsage:
    """CPU and memory of the process tree over a window."""

    seconds: float
    cpu_percent: float  # of one core
    rss_max: int
    rss_last: int
    pss_last: int | None
    procs_max: int
    names: Counter[str] = field(default_factory=Counter)  # kinds of process at the end
    cpu_by_kind: Counter[str] = field(default_factory=Counter)  # % of one core, per kind

    def lines(self) -> list[str]:
        gib = 1024**3
        pss = f"{self.pss_last / gib:.2f} GiB" if self.pss_last is not None else "n/a"
        names = ", ".join(f"{n} {name}" for name, n in self.names.most_common())
        return [
            f"CPU {self.cpu_percent:.1f} % of one core over {self.seconds:.0f} s",
            f"RSS total {self.rss_last / gib:.2f} GiB at the end (max {self.rss_max / gib:.2f} "
            f"GiB; summed per process, shared pages counted in each), PSS total {pss}",
            f"processes {sum(self.names.values())} at the end (max {self.procs_max}): {names}",
            "CPU by kind of process (% of one core, processes alive at both ends): "
            + ", ".join(f"{name} {pct:.1f}" for name, pct in self.cpu_by_kind.most_common()),
        ]


def watch_tree(seconds: float, interval: float = 2.0) -> TreeUsage:
    """Sample this process's tree for ``seconds``; CPU from the first and last sample.

    A process that ends in the window keeps counting: its parent (in the
    tree) adds its CPU to its own children's time when it reaps it.
    """
    first = process_tree()
    started = time.monotonic()
    rss_max = sum(p.rss for p in first)
    procs_max = len(first)
    last = first
    while (left := started + seconds - time.monotonic()) > 0:
        time.sleep(min(interval, left))
        last = process_tree()
        rss_max = max(rss_max, sum(p.rss for p in last))
        procs_max = max(procs_max, len(last))
    elapsed = time.monotonic() - started
    ticks = sum(p.ticks for p in last) - sum(p.ticks for p in first)
    before = {p.pid: p.ticks for p in first}
    by_kind: Counter[str] = Counter()
    for p in last:
        if p.pid in before:
            by_kind[command_label(p)] += 100.0 * (p.ticks - before[p.pid]) / CLOCK_TICKS / elapsed
    return TreeUsage(
        seconds=elapsed,
        cpu_percent=100.0 * ticks / CLOCK_TICKS / elapsed,
        rss_max=rss_max,
        rss_last=sum(p.rss for p in last),
        pss_last=pss_bytes(last),
        procs_max=procs_max,
        names=Counter(command_label(p) for p in last),
        cpu_by_kind=by_kind,
    )


# --- store setup ------------------------------------------------------------


def _is_postgres(url: str) -> bool:
    return url.split("://", 1)[0].split("+", 1)[0] in ("postgresql", "postgres")


def _libpq_url(url: str) -> str:
    """The URL without a SQLAlchemy driver suffix, for psycopg."""
    scheme, rest = url.split("://", 1)
    return f"{scheme.split('+', 1)[0]}://{rest}"


def _with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


@contextmanager
def bench_store(store_url: str | None, data_dir: Path) -> Iterator[tuple[Store, str]]:
    """An empty store: SQLite in ``data_dir`` by default, or a fresh PostgreSQL schema."""
    if store_url is None:
        store_url = f"sqlite:///{data_dir / 'sparkfn.db'}"
    if not _is_postgres(store_url):
        store = Store.open(store_url, data_dir)
        try:
            yield store, "sqlite" if store_url.startswith("sqlite") else store_url
        finally:
            store.close()
        return

    import psycopg

    server = _libpq_url(store_url)
    schema = f"sparkfn_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        store = Store.open(_with_search_path(store_url, schema), data_dir)
        try:
            yield store, f"postgresql (schema {schema}, dropped afterwards)"
        finally:
            store.close()
    finally:
        with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
            conn.execute("SET lock_timeout = '30s'")
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
