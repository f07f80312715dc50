"""A real worker process: ``sparkfn worker start`` on a free port, driven over HTTP."""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from sparkfn.store.store import Store
from sparkfn.topics.consumer import Consumer
from waiting import until

MIB = 1024 * 1024
SHARED_ENV = {
    "SPARKFN_WORKER_PACKAGE_INDEX_URL": "none",
    "SPARKFN_WORKER_MAX_UPLOAD_BYTES": str(MIB),
    "SPARKFN_WORKER_MAX_EXPANDED_BYTES": str(2 * MIB),
    # One task slot: the package tests need one Python worker to run two zips.
    "SPARKFN_WORKER_SPARK_MASTER": "local[1]",
    # Functions quiet for 3 s are parked, so every worker test that pauses
    # goes through a park and a wake-up too (test_parking_worker.py checks them).
    "SPARKFN_WORKER_PARK_IDLE_AFTER": "3",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class WorkerProcess:
    """One ``sparkfn worker start`` child and an HTTP client for it."""

    data_dir: Path
    store_url: str
    port: int = field(default_factory=free_port)
    # Added to this process's environment, e.g. SPARKFN_WORKER_* settings.
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    # In a session of its own: a signal to its process group reaches its whole tree only.
    new_session: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> WorkerProcess:
        self.log = self.data_dir / f"worker-{time.monotonic_ns()}.log"
        command = [
            sys.executable,
            "-m",
            "sparkfn.cli.main",
            "--data-dir",
            str(self.data_dir),
            "--store-url",
            self.store_url,
            "worker",
            "start",
            "--port",
            str(self.port),
        ]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                start_new_session=self.new_session,
            )
        until(self._answers, lambda: f"the worker to answer:\n{self.output()}", timeout, every=0.3)
        return self

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"the worker exited with {self.proc.returncode}:\n{self.output()}")
        try:
            httpx.get(self.url + "/admin/v3/functions/public/default", timeout=2)
        except httpx.TransportError:
            return False
        return True

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until ``/ready`` says yes: the worker restored its functions (a create must not race that)."""
        ready = httpx.get(self.url + "/ready", timeout=30)

        def is_ready() -> bool:
            nonlocal ready
            ready = httpx.get(self.url + "/ready", timeout=30)
            return ready.status_code != 503

        until(
            is_ready,
            lambda: f"the worker ready: {ready.text}\n{self.output()}",
            timeout,
            every=0.5,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url + "/admin/v3/functions", timeout=120)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@dataclass
class SharedWorker:
    """The shared worker process and a store opened on the worker's own store."""

    process: WorkerProcess
    store: Store

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def data_dir(self) -> Path:
        return self.process.data_dir

    def client(self) -> httpx.Client:
        return self.process.client()

    def output(self) -> str:
        return self.process.output()


def topic_counts(store: Store, topic: str = "out") -> collections.Counter[str]:
    """Every value of ``topic`` (decoded), counted: a repeat shows as a count of 2."""
    consumer = Consumer(store, topic, initial_position="earliest")
    out: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        out.update(m.value.decode() for m in batch if m.value is not None)
    return out
