"""Chaos: three workers on one PostgreSQL store, steady input, random faults; count what was lost.

Issue 37's acceptance run: ``--workers`` ``sparkfn worker start`` processes
(each in a session of its own, on a fresh schema of the PostgreSQL server and
one shared data directory), ``--functions`` functions created through the
REST API (``effectively_once``, one input topic and one output topic each),
a producer sending ``--rate`` messages a second spread over them, and for
``--minutes`` a fault every few seconds, picked at random:

* ``kill-worker``: SIGKILL a worker process (its JVM and Python processes
  go with it); a supervisor here starts it again after ``--restart-after`` s,
  as a service manager would;
* ``stop-worker``: SIGSTOP a worker past its lease, then SIGCONT;
* ``kill-jvm``: SIGKILL a worker's Spark JVM (the worker starts a new session);
* ``kill-python``: SIGKILL one of a worker's Spark Python processes;
* ``restart-postgresql`` (only with ``--pg-restarts``): restart the server,
  which every other user of it notices.

Then the faults stop, the producer stops, and the run waits (``--drain``
seconds at most) for every function to catch up. It prints the faults
injected, the longest stall (the longest time the outputs did not grow while
input was waiting), and per function under ``effectively_once``: inputs
without an output (lost) and outputs more than once (repeated), and whether
each function is RUNNING. ``!!!`` marks a wrong count.

::

    .venv/bin/python benchmarks/chaos.py --minutes 10 --pg-restarts   # the acceptance run
    .venv/bin/python benchmarks/chaos.py --minutes 1.5 --functions 10 --pg-restarts
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.producer import Producer

HERE = Path(__file__).resolve().parent
CODE = HERE.parent / "examples" / "exclamation.py"
PG_SERVER = "postgresql://postgres@127.0.0.1:5432/test"
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
LEASE = 5.0  # seconds: short, so a fault's effects show within the run


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def session_pids(sid: int) -> dict[int, str]:
    """``{pid: command line}`` of the live processes of session ``sid`` (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
    return {pid: cmd.decode(errors="replace") for pid, cmd in found.items()}


@dataclass
class Worker:
    """One ``sparkfn worker start`` in a session of its own, started again after a kill."""

    name: str
    port: int
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [sys.executable, "-m", "sparkfn.cli.main", "worker", "start"]
        command += ["--port", str(self.port), "--worker-id", self.name]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.starts += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ready(self) -> bool:
        try:
            return httpx.get(self.url + "/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def children(self, word: str) -> list[int]:
        """Pids of this worker's session whose command line holds ``word`` (not the worker)."""
        if self.proc is None:
            return []
        pids = session_pids(self.proc.pid)
        return [pid for pid, cmd in pids.items() if word in cmd and pid != self.proc.pid]

    def stop(self) -> None:
        """SIGTERM, then SIGKILL to whatever is left of its session."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped one cannot end
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(90)
        for pid in session_pids(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


@dataclass
class Chaos:
    """The faults: injected at random, counted, the killed workers started again."""

    workers: list[Worker]
    pg_restarts: bool
    restart_after: float
    rng: random.Random
    injected: collections.Counter[str] = field(default_factory=collections.Counter)
    log: list[str] = field(default_factory=list)

    def inject(self) -> None:
        kinds = ["kill-worker", "stop-worker", "kill-jvm", "kill-python"]
        if self.pg_restarts:
            kinds.append("restart-postgresql")
        kind = self.rng.choice(kinds)
        worker = self.rng.choice([w for w in self.workers if w.alive()] or self.workers)
        done = getattr(self, "_" + kind.replace("-", "_"))(worker)
        if done:
            self.injected[kind] += 1
            self.log.append(f"{time.strftime('%H:%M:%S')} {kind} {done}")
            print(f"  fault: {kind} {done}", flush=True)

    def _kill_worker(self, worker: Worker) -> str:
        if not worker.alive() or worker.proc is None:
            return ""
        for pid in [worker.proc.pid, *session_pids(worker.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        worker.proc.wait()
        timer = threading.Timer(self.restart_after, worker.start)
        timer.daemon = True
        timer.start()
        return f"{worker.name} (started again in {self.restart_after:g} s)"

    def _stop_worker(self, worker: Worker) -> str:
        if not worker.alive() or worker.proc is None:
            return ""
        pids = [worker.proc.pid, *session_pids(worker.proc.pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        pause = LEASE * 1.5

        def resume() -> None:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

        # On a timer: the run's sampling goes on meanwhile (the stall is measured).
        timer = threading.Timer(pause, resume)
        timer.daemon = True
        timer.start()
        return f"{worker.name} for {pause:g} s"

    def _kill_child(self, worker: Worker, word: str) -> str:
        pids = worker.children(word)
        if not pids:
            return ""
        pid = self.rng.choice(pids)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return f"{worker.name} pid {pid}"

    def _kill_jvm(self, worker: Worker) -> str:
        return self._kill_child(worker, "java")

    def _kill_python(self, worker: Worker) -> str:
        return self._kill_child(worker, "sparkfn.runtime.spark.")

    def _restart_postgresql(self, _worker: Worker) -> str:
        versions = sorted(p.name for p in Path("/etc/postgresql").iterdir())
        command = ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "restart"]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        return "" if done.returncode else f"version {versions[-1]}"


def fresh_schema() -> tuple[str, str]:
    schema = f"sparkfn_chaos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_SERVER, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    options = quote(f"-csearch_path={schema}", safe="-")
    return schema, f"{PG_SERVER}?options={options}&application_name={schema}"


def drop_schema(schema: str) -> None:
    with psycopg.connect(PG_SERVER, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            [schema],
        )
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def values(store: Store, topic: str) -> collections.Counter[str]:
    consumer = Consumer(store, topic, initial_position="earliest")
    found: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        found.update(m.value.decode() for m in batch if m.value is not None)
    return found


def produce(store: Store, names: list[str], rate: float, stop: threading.Event) -> list[str]:
    """Send ``rate`` messages a second, round robin over the functions' inputs, until ``stop``.

    Returns the send errors (a restarted server fails a few): a failed send is
    not retried, and the input topic, not this count, is the truth at the end.
    """
    producers = {name: Producer(store, f"in-{name}") for name in names}
    errors: list[str] = []
    seq, began = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - began) * rate)
        while seq < due and not stop.is_set():
            name = names[seq % len(names)]
            try:
                producers[name].send(f"{name}-{seq:08d}")
            except Exception as exc:  # noqa: BLE001 - counted, then the pace goes on
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            seq += 1
        time.sleep(0.05)
    return errors


def main() -> int:  # noqa: PLR0915 - one run, its steps in order
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--functions", type=int, default=50)
    parser.add_argument("--rate", type=float, default=50.0, help="messages a second, over all")
    parser.add_argument("--fault-every", type=float, default=15.0, help="mean seconds between")
    parser.add_argument("--restart-after", type=float, default=5.0)
    parser.add_argument("--pg-restarts", action="store_true", help="restart PostgreSQL too")
    parser.add_argument("--drain", type=float, default=300.0, help="seconds to catch up, at most")
    parser.add_argument("--spark-master", default="local[1]")
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"load average at the start: {load_average()}", flush=True)

    root = Path(tempfile.mkdtemp(prefix="sparkfn-chaos-"))
    schema, url = fresh_schema()
    data_dir = root / "data"
    data_dir.mkdir()
    env = {
        **os.environ,
        "SPARKFN_DATA_DIR": str(data_dir),
        "SPARKFN_STORE_URL": url,
        "SPARKFN_WORKER_SPARK_MASTER": args.spark_master,
        "SPARKFN_WORKER_LEASE": str(LEASE),
        "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", JVM_OPTIONS),
    }
    ports = [free_port() for _ in range(args.workers)]
    workers = [Worker(f"w{i}", port, env, root / f"w{i}.log") for i, port in enumerate(ports)]
    store = Store.open(url, data_dir)
    names = [f"f{i:03d}" for i in range(args.functions)]
    stop = threading.Event()
    errors: list[str] = []
    chaos = Chaos(workers, args.pg_restarts, args.restart_after, rng)
    samples: list[tuple[float, int, int]] = []  # (time, inputs, outputs)
    try:
        admin = TopicAdmin(store)
        for name in names:
            admin.create(f"in-{name}", schema_type="string")
            admin.create(f"out-{name}", schema_type="string")
        began = time.monotonic()
        for worker in workers:  # one after another: three JVMs at once starve two cores
            worker.start()
            wait_for(worker.ready, f"{worker.name} ready", 300)
        print(f"{args.workers} workers ready in {time.monotonic() - began:.0f} s", flush=True)
        create_all(workers[0].url, names)
        print(f"{len(names)} functions created", flush=True)

        feeder_result: list[list[str]] = []
        feeder = threading.Thread(
            target=lambda: feeder_result.append(produce(store, names, args.rate, stop)),
            daemon=True,
        )
        feeder.start()
        end = time.monotonic() + args.minutes * 60
        next_fault = time.monotonic() + rng.expovariate(1 / args.fault_every)
        while time.monotonic() < end:
            samples.append((time.monotonic(), *totals(store, names)))
            if time.monotonic() >= next_fault:
                chaos.inject()
                next_fault = time.monotonic() + rng.expovariate(1 / args.fault_every)
            time.sleep(1.0)
        stop.set()
        feeder.join()
        errors = feeder_result[0] if feeder_result else []
        for worker in workers:  # a killed one comes back for the drain
            if not worker.alive():
                worker.start()
        drain_until = time.monotonic() + args.drain
        while time.monotonic() < drain_until:
            samples.append((time.monotonic(), *totals(store, names)))
            if samples[-1][1] == samples[-1][2]:
                break
            time.sleep(2.0)
        report(store, names, workers, chaos, samples, errors)
    finally:
        stop.set()
        for worker in workers:
            worker.stop()
        store.close()
        drop_schema(schema)
        shutil.rmtree(root, ignore_errors=True)
        print(f"load average at the end: {load_average()}", flush=True)
    return 0


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: object, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            msg = f"{what}: not within {seconds:g} s"
            raise SystemExit(msg)
        time.sleep(1.0)


def create_all(url: str, names: list[str]) -> None:
    config = {"processingGuarantees": "EFFECTIVELY_ONCE", "subscriptionPosition": "Earliest"}
    with httpx.Client(base_url=url + "/admin/v3/functions/public/default", timeout=300) as client:
        for name in names:
            body = {**config, "inputs": [f"in-{name}"], "output": f"out-{name}"}
            with CODE.open("rb") as code:
                answer = client.post(
                    f"/{name}",
                    data={"functionConfig": json.dumps(body)},
                    files={"data": (CODE.name, code, "text/x-python")},
                )
            if answer.status_code != 200:
                msg = f"creating {name}: {answer.status_code} {answer.text}"
                raise SystemExit(msg)


def totals(store: Store, names: list[str]) -> tuple[int, int]:
    """Messages in every input topic, and in every output topic, now."""
    with store.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT t.name, SUM(p.next_offset) FROM topics t "
            "JOIN topic_partitions p ON p.topic_id = t.id GROUP BY t.name"
        ).all()
    counts = {str(name): int(total or 0) for name, total in rows}
    inputs = sum(counts.get(f"in-{n}", 0) for n in names)
    outputs = sum(counts.get(f"out-{n}", 0) for n in names)
    return inputs, outputs


def longest_stall(samples: list[tuple[float, int, int]]) -> float:
    """The longest time the outputs did not grow while inputs were waiting."""
    longest, since = 0.0, None
    for (at, inputs, outputs), previous in zip(samples[1:], samples, strict=False):
        if outputs <= previous[2] and inputs > outputs:
            since = previous[0] if since is None else since
            longest = max(longest, at - since)
        else:
            since = None
    return longest


def report(
    store: Store,
    names: list[str],
    workers: list[Worker],
    chaos: Chaos,
    samples: list[tuple[float, int, int]],
    errors: list[str],
) -> None:
    lost = repeated = 0
    wrong = []
    for name in names:
        sent = values(store, f"in-{name}")
        got = values(store, f"out-{name}")
        missing = sum(1 for v in sent if got[v + "!"] == 0)
        extra = sum(n - 1 for n in got.values() if n > 1)
        lost, repeated = lost + missing, repeated + extra
        if missing or extra:
            wrong.append(f"{name}: {missing} lost, {extra} repeated of {sum(sent.values())}")
    states = function_states([w for w in workers if w.alive()], names)
    not_running = {n: s for n, s in states.items() if s != "RUNNING"}
    inputs, outputs = samples[-1][1:] if samples else (0, 0)
    print("\n--- chaos ---")
    print(f"faults injected: {sum(chaos.injected.values())} {dict(chaos.injected)}")
    for line in chaos.log:
        print(f"  {line}")
    print(f"worker starts: {[w.starts for w in workers]}")
    print(f"inputs {inputs}, outputs {outputs}, send errors {len(errors)}")
    print(f"longest stall: {longest_stall(samples):.1f} s")
    mark = "!!! " if lost or repeated else ""
    print(f"{mark}lost {lost}, repeated {repeated} (effectively_once, {len(names)} functions)")
    for line in wrong[:20]:
        print(f"  !!! {line}")
    mark = "!!! " if not_running else ""
    print(f"{mark}functions RUNNING: {len(names) - len(not_running)} of {len(names)}")
    for name, state in list(not_running.items())[:20]:
        print(f"  !!! {name}: {state}")


def function_states(workers: list[Worker], names: list[str]) -> dict[str, str]:
    """Each function's state as the first answering worker reports it."""
    states = {}
    for name in names:
        states[name] = "no worker answered"
        for worker in workers:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                status = httpx.get(
                    f"{worker.url}/admin/v3/functions/public/default/{name}/status", timeout=30
                ).json()
                running = status.get("numRunning", 0) == status.get("numInstances", -1)
                states[name] = "RUNNING" if running else json.dumps(status)[:200]
                break
    return states


if __name__ == "__main__":
    sys.exit(main())
