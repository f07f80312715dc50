"""A cluster of workers on a Spark cluster, on this machine: a killed worker's function goes on elsewhere.

Run it with ``make demo-cluster`` (PostgreSQL on 127.0.0.1:5432, database
``test``, user ``postgres``, or ``--pg-server``). In a scratch data
directory and a fresh schema it does what an operator does, printing each
command:

1. ``sparkfn cluster up``: a Spark standalone master and a Spark worker of
   three cores, every application (each sparkfn worker) capped at one, so
   each sparkfn worker gets an executor of its own;
2. three ``sparkfn worker start --spark-master spark://...`` (a, b, c) on the
   one PostgreSQL store and the one data directory;
3. ``sparkfn functions create`` on worker a (``effectively_once``), and a
   steady producer;
4. SIGKILL of the worker running the function;
5. waits for the function to run on another worker (``workerId`` in its
   status), stops the producer, and checks every input has exactly one
   output;

then stops the workers, ``sparkfn cluster down``, drops the schema and
removes the directory: no process, no file left. A step that fails says
which and why, and the demo exits 1 after cleaning up.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg

from sparkfn.store.store import Store

HERE = Path(__file__).resolve().parent
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
WAIT_S = 180.0
MOVE_S = 90.0  # for the function to run elsewhere after the kill


class DemoError(Exception):
    """A step failed; the message says which and why."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def say(shown: str) -> None:
    print(f"\n$ {shown}", flush=True)


class Demo:
    """The scratch directory, the schema, the workers and the commands run against them."""

    def __init__(self, root: Path, store_url: str) -> None:
        self.root = root
        self.env = {
            **os.environ,
            "SPARKFN_DATA_DIR": str(root / "data"),
            "SPARKFN_STORE_URL": store_url,
            "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", JVM_OPTIONS),
        }
        self.workers: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}

    def sparkfn(self, *args: str, url: str | None = None, capture: bool = False) -> str:
        say("sparkfn " + " ".join(args))
        env = {**self.env, **({"SPARKFN_URL": url} if url else {})}
        done = subprocess.run(
            [sys.executable, "-m", "sparkfn.cli.main", *args],
            env=env,
            stdout=subprocess.PIPE if capture else None,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            msg = f"sparkfn {' '.join(args[:2])} exited with {done.returncode}"
            raise DemoError(msg)
        return done.stdout or ""

    def start_worker(self, name: str, master: str) -> None:
        port = free_port()
        say(f"sparkfn worker start --worker-id {name} --port {port} --spark-master {master} &")
        with (self.root / f"worker-{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sparkfn.cli.main", "worker", "start", "--worker-id",
                 name, "--port", str(port), "--spark-master", master],
                env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.workers[name] = (port, proc)
        deadline = time.monotonic() + WAIT_S
        while not self.ready(name):
            if proc.poll() is not None or time.monotonic() > deadline:
                msg = f"worker {name} did not become ready (see {self.root}/worker-{name}.log)"
                raise DemoError(msg)
            time.sleep(1.0)
        print(f"  worker {name} ready at http://127.0.0.1:{port}")

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.workers[name][0]}"

    def ready(self, name: str) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(self.url(name) + "/ready", timeout=2).status_code == 200
        return False

    def kill(self, name: str) -> None:
        say(f"kill -KILL <worker {name}>    # and its Spark driver with it")
        _, proc = self.workers[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def owner(self, asking: str) -> tuple[str, bool]:
        """The function's worker and whether it runs, as worker ``asking`` sees it."""
        status = httpx.get(
            f"{self.url(asking)}/admin/v3/functions/public/default/exclaim/status", timeout=30
        ).json()
        instances = status.get("instances", [])
        ids = {i["status"].get("workerId", "") for i in instances}
        return ",".join(sorted(ids)), bool(instances) and status["numRunning"] == len(instances)

    def stop_all(self) -> None:
        for _, proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in self.workers.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(90)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def run(demo: Demo) -> bool:
    from sparkfn.topics.producer import Producer

    up = demo.sparkfn(
        "cluster", "up", "--workers", "1", "--cores", "3", "--memory", "3g", "--app-cores", "1",
        "--port", str(free_port()), "--webui-port", str(free_port()), capture=True,
    )  # fmt: skip
    print(up, end="")
    status = json.loads(demo.sparkfn("cluster", "status", "--json", capture=True))
    master = status["masterUrl"]
    for name in ("a", "b", "c"):  # one after another: three JVMs at once starve a small machine
        demo.start_worker(name, master)
    demo.sparkfn("topics", "create", "in", "--partitions", "2", "--schema-type", "string")
    demo.sparkfn("topics", "create", "out", "--schema-type", "string")
    demo.sparkfn(
        "functions", "create", "--py", str(HERE / "exclamation.py"), "--name", "exclaim",
        "--inputs", "in", "--output", "out", "--processing-guarantees", "effectively_once",
        url=demo.url("a"),
    )  # fmt: skip
    store = Store.open(demo.env["SPARKFN_STORE_URL"], Path(demo.env["SPARKFN_DATA_DIR"]))
    stop = threading.Event()
    sent: list[str] = []

    def produce() -> None:
        producer = Producer(store, "in")
        while not stop.is_set():
            value = f"m{len(sent):05d}"
            producer.send(value)
            sent.append(value)
            time.sleep(0.1)

    feeder = threading.Thread(target=produce, daemon=True)
    feeder.start()
    try:
        time.sleep(5)
        owner, _ = demo.owner("a")
        print(f"  the function runs on worker {owner}")
        if owner not in demo.workers:
            msg = f"no single worker runs the function (workerId {owner!r})"
            raise DemoError(msg)
        demo.kill(owner)
        asking = next(n for n in demo.workers if n != owner)
        # Moved: another worker's id in the status, and outputs growing again. (A
        # status alone is not enough: a dead worker's run stays RUNNING in the store.)
        time.sleep(2.0)
        at_kill = len(outputs(store))
        deadline = time.monotonic() + MOVE_S
        moved = False
        while time.monotonic() < deadline and not moved:
            now, running = demo.owner(asking)
            moved = running and now not in ("", owner) and len(outputs(store)) > at_kill + 10
            time.sleep(1.0)
        if not moved:
            print(f"\nthe function did not move off worker {owner} within {MOVE_S:g} s:")
            print("failover (issue 37) is not built yet; this demo shows it once it is")
            return False
        print(f"  the function now runs on worker {now}")
    finally:
        stop.set()
        feeder.join()
    expected = collections.Counter(v + "!" for v in sent)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        got = outputs(store)
        if got == expected or got - expected:
            break
        time.sleep(1.0)
    store.close()
    lost, repeated = len(expected - got), sum((got - expected).values())
    print(f"\n{len(sent)} messages sent across the kill: {lost} lost, {repeated} repeated")
    return lost == 0 and repeated == 0


def outputs(store: Store) -> collections.Counter[str]:
    """Every value of the output topic, counted."""
    from sparkfn.topics.consumer import Consumer

    consumer = Consumer(store, "out", initial_position="earliest")
    got: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        got.update(m.value.decode() for m in batch if m.value is not None)
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    with ExitStack() as cleanup:
        root = Path(tempfile.mkdtemp(prefix="sparkfn-demo-cluster-"))
        (root / "data").mkdir()
        cleanup.callback(shutil.rmtree, root, ignore_errors=True)
        schema = f"sparkfn_demo_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(args.pg_server, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        cleanup.callback(drop_schema, args.pg_server, schema)
        options = quote(f"-csearch_path={schema}", safe="-")
        demo = Demo(root, f"{args.pg_server}?options={options}&application_name={schema}")
        cleanup.callback(
            subprocess.run,
            [sys.executable, "-m", "sparkfn.cli.main", "cluster", "down"],
            env=demo.env,
            check=False,
        )
        cleanup.callback(demo.stop_all)
        try:
            ok = run(demo)
        except (DemoError, httpx.HTTPError) as exc:
            print(f"\ndemo failed: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("\ndemo interrupted; cleaning up", file=sys.stderr)
            return 130
        return 0 if ok else 1
    return 1


def drop_schema(server: str, schema: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            [schema],
        )
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    sys.exit(main())
