"""A worker parks a quiet function's query and wakes it on input (docs/worker.md).

Parking is for functions with a query of their own (``dedicated``); a
group's members never park (an idle member costs its group nothing).

The shared worker parks after 3 s (``worker_process.SHARED_ENV``). Seen from
outside: the function's instances stay RUNNING while it is parked, every message sent before,
during and after a park comes out exactly once, the worker's log says when
it parked and woke, and a drain of the parked function stops it gracefully.
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_worker_versions import _awaittopic_counts, _send, _setup
from worker_process import SharedWorker

from sparkfn.runtime.spark.session import WARM_UP_GROUP
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings
from waiting import until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WAIT = 120


def _wait_log(shared_worker: SharedWorker, text: str, count: int) -> None:
    until(
        lambda: shared_worker.output().count(text) >= count,
        f"the worker's log to say {text!r} {count} time(s)",
        WAIT,
        every=0.2,
    )


@pytest.mark.long_running(40)
def test_a_quiet_function_parks_and_wakes_on_input_losing_nothing(
    shared_worker: SharedWorker,
) -> None:
    store = shared_worker.store
    _setup(store)
    name = f"park-{uuid.uuid4().hex[:8]}"
    parked = f"function public/default/{name}: input quiet for 3 s; parking its query"
    woken = f"function public/default/{name}: input arrived; starting it again"
    producer = Producer(store, "in")
    expected: collections.Counter[str] = collections.Counter()
    with shared_worker.client() as client:
        _send(client, "POST", name, EXAMPLES / "exclamation.py", parallelism=2, dedicated=True)
        for round_ in range(1, 3):
            values = [f"r{round_}-{i}" for i in range(40)]
            producer.send_batch([Message(v.encode()) for v in values])
            expected.update(v + "!" for v in values)
            _awaittopic_counts(store, expected)
            _wait_log(shared_worker, parked, round_)
            status = client.get(f"/public/default/{name}/status").json()
            assert status["numRunning"] == 2, status
            if round_ > 1:
                _wait_log(shared_worker, woken, round_ - 1)
        response = client.post(f"/public/default/{name}/drain")
        assert response.status_code == 204, response.text

        def stopped() -> dict[str, Any] | None:
            status: dict[str, Any] = client.get(f"/public/default/{name}/status").json()
            return status if status["state"] == "STOPPED" else None

        status = until(stopped, f"{name} drained (STOPPED)", WAIT, every=0.2)
        assert status["numRunning"] == 0, status
    _awaittopic_counts(store, expected)


def test_a_worker_that_makes_its_session_warms_it_up_in_the_background(
    spark: Any, store_url: str, data_dir: Path
) -> None:
    """So the first batch after a start with every input idle (a parked function's
    wake-up) does not pay the session's first Python task."""
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url))
    assert worker.spark is spark  # this process's session, got as a worker gets its own
    assert worker.warming is not None
    worker.warming.join(120)
    assert not worker.warming.is_alive()
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(WARM_UP_GROUP)]
    assert jobs and all(job.status == "SUCCEEDED" for job in jobs), jobs
    # Given a session, a worker leaves it as it is.
    assert Worker(WorkerSettings.resolve(data_dir=data_dir), spark=spark).warming is None
