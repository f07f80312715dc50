"""The main job, the managed way: a worker runs the word-count function submitted to it.

Run it with ``make demo`` (add ``--verbose`` to see the worker's and Spark's
own log). In a scratch data directory it starts ``sparkfn worker start`` on
the embedded SQLite store, then does what a user does, printing each command:

1. ``sparkfn topics create`` the input and output topics;
2. ``sparkfn functions create`` the word count (``examples/wordcount.py``)
   on the worker, effectively once;
3. ``sparkfn topics produce`` sample sentences;
4. ``sparkfn functions status --watch`` while the worker processes them;
5. ``sparkfn functions querystate`` the word counters;

and stops the worker (SIGTERM: its function is suspended) and removes the
directory, leaving no process and no file behind. The worker's output (the
JVM's warnings, log4j's banners) goes to a log file in the directory, shown
only if something fails. Exit code 0 when every sentence was processed once
and the counters add up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
SENTENCES = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "the dog sleeps",
    "pulsar functions on spark",
    "spark runs the functions",
]
SHOWN_WORDS = ["the", "spark", "functions", "dog"]
WAIT_S = 120.0
# A short-lived JVM running tiny batches: the JIT's first tier and the serial
# GC cost far less CPU than the defaults (as the test suite runs Spark).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class DemoError(Exception):
    """A step of the demo failed; the message says which and why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Demo:
    """The scratch directory, the worker process and the ``sparkfn`` commands run against it."""

    def __init__(self, data_dir: Path, verbose: bool) -> None:
        self.data_dir = data_dir
        self.verbose = verbose
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = data_dir / "worker.log"
        self.env = {
            **os.environ,
            "SPARKFN_DATA_DIR": str(data_dir),
            "SPARKFN_URL": self.url,
            "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", JVM_OPTIONS),
        }
        self.env.pop("SPARKFN_STORE_URL", None)  # the embedded store, in the scratch directory
        self.worker: subprocess.Popen[bytes] | None = None

    def start_worker(self) -> None:
        """``sparkfn worker start``; returns once the worker is ready (Spark up, restore done)."""
        port = self.url.rsplit(":", 1)[1]
        self.say(f"sparkfn worker start --port {port} --spark-master 'local[2]'")
        with self.log.open("wb") as log:
            self.worker = subprocess.Popen(
                self.command("worker", "start", "--port", port, "--spark-master", "local[2]"),
                env=self.env,
                stdout=None if self.verbose else log,
                stderr=None if self.verbose else subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped whole, below
            )
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if self.worker.poll() is not None:
                msg = f"the worker exited with {self.worker.returncode}"
                raise DemoError(msg)
            try:
                if httpx.get(self.url + "/ready", timeout=2).status_code == 200:
                    print(f"  worker ready at {self.url}")
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        msg = f"the worker was not ready within {WAIT_S:g} s"
        raise DemoError(msg)

    def stop_worker(self) -> None:
        """SIGTERM (the function is suspended), then the whole process group if it lingers."""
        if self.worker is None or self.worker.poll() is not None:
            return
        self.say("kill -TERM <worker>    # stops gracefully: the function is suspended")
        self.worker.send_signal(signal.SIGTERM)
        try:
            self.worker.wait(60)
        except subprocess.TimeoutExpired:
            self.worker.kill()
            self.worker.wait()
        try:  # Spark's JVM is the worker's child; nothing of the group may outlive the demo
            os.killpg(self.worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "sparkfn.cli.main", *args]

    def say(self, shown: str) -> None:
        print(f"\n$ {shown}", flush=True)

    def sparkfn(self, *args: str, capture: bool = False) -> str:
        """Run ``sparkfn ARGS`` as a user would, showing the command; its stdout if ``capture``."""
        self.say("sparkfn " + " ".join(a if " " not in a else repr(a) for a in args))
        done = subprocess.run(
            self.command(*args),
            env=self.env,
            stdout=subprocess.PIPE if capture else None,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            msg = f"sparkfn {args[0]} {args[1]} exited with {done.returncode}"
            raise DemoError(msg)
        return done.stdout or ""

    def watch_status(self, expected: int) -> None:
        """``functions status --watch`` until the function has processed ``expected`` messages."""
        self.say("sparkfn functions status --name wordcount --watch    # Ctrl+C ends it")
        watch = subprocess.Popen(
            self.command("functions", "status", "--name", "wordcount", "--watch"), env=self.env
        )
        interrupted = False
        try:
            deadline = time.monotonic() + WAIT_S
            while self.processed() < expected:
                if time.monotonic() > deadline:
                    msg = f"fewer than {expected} sentences processed in {WAIT_S:g} s"
                    raise DemoError(msg)
                time.sleep(0.5)
            time.sleep(1.5)  # one more refresh of the table, with the final numbers
            watch.send_signal(signal.SIGINT)  # as a user's Ctrl+C
            interrupted = True
        finally:
            if not interrupted:
                watch.terminate()
            try:
                watch.wait(30)
            except subprocess.TimeoutExpired:
                watch.kill()
                watch.wait()

    def processed(self) -> int:
        response = httpx.get(
            f"{self.url}/admin/v3/functions/public/default/wordcount/status", timeout=30
        )
        if not response.is_success:
            msg = f"the function's status: HTTP {response.status_code}: {response.text}"
            raise DemoError(msg)
        status = response.json()
        return sum(i["status"]["numSuccessfullyProcessed"] for i in status["instances"])

    def counter(self, word: str) -> int:
        response = httpx.get(
            f"{self.url}/admin/v3/functions/public/default/wordcount/state/{word}", timeout=30
        )
        return int(response.json().get("numberValue") or 0) if response.is_success else 0

    def show_log(self) -> None:
        if self.verbose or not self.log.exists():
            return
        lines = self.log.read_text(errors="replace").splitlines()
        print(f"\n--- the worker's log (last 60 of {len(lines)} lines) ---", file=sys.stderr)
        for line in lines[-60:]:
            print(line, file=sys.stderr)


def run(demo: Demo) -> bool:
    """The user's steps against the worker; whether every result is as expected."""
    demo.start_worker()
    demo.sparkfn("topics", "create", "sentences", "--partitions", "2", "--schema-type", "string")
    demo.sparkfn("topics", "create", "echo", "--partitions", "2", "--schema-type", "string")
    demo.sparkfn(
        "functions",
        "create",
        "--py",
        str(HERE / "wordcount.py"),
        "--classname",
        "wordcount.WordCount",
        "--name",
        "wordcount",
        "--inputs",
        "sentences",
        "--output",
        "echo",
        "--processing-guarantees",
        "effectively_once",
    )
    produce = [arg for sentence in SENTENCES for arg in ("-m", sentence)]
    demo.sparkfn("topics", "produce", "sentences", *produce)
    demo.watch_status(len(SENTENCES))
    for word in SHOWN_WORDS:
        demo.sparkfn("functions", "querystate", "--name", "wordcount", "--key", word, "-o", "table")
    words = Counter(word for sentence in SENTENCES for word in sentence.split())
    counted = {word: demo.counter(word) for word in words}
    wrong = {w: (counted[w], n) for w, n in words.items() if counted[w] != n}
    processed = demo.processed()
    demo.stop_worker()
    print(f"\n{processed} sentences processed once, {sum(words.values())} words counted", end="")
    print(f"; counters that differ (got, expected): {wrong}" if wrong else ", every counter right")
    return processed == len(SENTENCES) and not wrong


def main() -> int:
    """Run the demo in a scratch directory; remove it and every process it started."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbose", action="store_true", help="show the worker's own log")
    args = parser.parse_args()
    with ExitStack() as cleanup:
        data_dir = Path(tempfile.mkdtemp(prefix="sparkfn-demo-"))
        cleanup.callback(shutil.rmtree, data_dir, ignore_errors=True)
        demo = Demo(data_dir, args.verbose)
        cleanup.callback(demo.stop_worker)
        try:
            ok = run(demo)
        except (DemoError, httpx.HTTPError) as exc:
            print(f"\ndemo failed: {exc}", file=sys.stderr)
            demo.stop_worker()
            demo.show_log()
            return 1
        except KeyboardInterrupt:
            print("\ndemo interrupted; stopping the worker", file=sys.stderr)
            return 130
        if not ok:
            demo.show_log()
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
