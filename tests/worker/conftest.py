"""Fixtures of the worker tests: a real worker process on the test's store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from worker_process import WorkerProcess


@pytest.fixture
def worker_process(store_url: str, data_dir: Path) -> Iterator[WorkerProcess]:
    """A started worker on the test's store; stopped (SIGTERM, then SIGKILL) at the end."""
    worker = WorkerProcess(data_dir, store_url).start()
    yield worker
    if worker.proc is not None and worker.proc.poll() is None:
        worker.stop()
