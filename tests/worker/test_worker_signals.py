"""A worker stopped by a signal prints no traceback, from any process of its tree.

A worker of its own (in a session of its own) runs a function that has
processed a message; then it gets SIGTERM (a service manager's stop) or a
SIGINT to its whole process group (a terminal's Ctrl+C, which reaches its
JVM, zygote and Spark's Python processes too). It exits cleanly, its function
suspended, and its output (stdout and stderr, every child's included) holds
no traceback, interrupt or query failure.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from brokers import wait_for
from worker_process import WorkerProcess, topic_counts

from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

ECHO = Path(__file__).resolve().parents[1] / "runtime" / "funcs" / "named_echo.py"
CONFIG = {
    "inputs": ["in"],
    "output": "out",
    "className": "named_echo.NamedEcho",
    "subscriptionPosition": "Earliest",
}
NOT_SAID = ("Traceback", "KeyboardInterrupt", "QueryFailed", "STREAM_FAILED")


@pytest.mark.long_running(60)
@pytest.mark.backend("sqlite")
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT to the group"])
def test_a_worker_stopped_by_a_signal_prints_no_traceback(
    store: Store, store_url: str, data_dir: Path, how: str
) -> None:
    admin = TopicAdmin(store)
    admin.create("in", schema_type="string")
    admin.create("out", schema_type="string")
    worker = WorkerProcess(data_dir, store_url, new_session=True).start()
    try:
        with worker.client() as client, ECHO.open("rb") as code:
            made = client.post(
                "/public/default/echo",
                data={"functionConfig": json.dumps(CONFIG)},
                files={"data": (ECHO.name, code, "text/x-python")},
            )
        assert made.status_code == 200, made.text
        Producer(store, "in").send_batch([Message(b"a")])
        wait_for(lambda: topic_counts(store) == {"echo:a": 1}, "the output", 120, worker.log)
        assert worker.proc is not None
        if how == "SIGTERM":
            worker.proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(worker.proc.pid, signal.SIGINT)
        code = worker.proc.wait(120)
    finally:
        worker.stop(signal.SIGKILL)  # only if it is still there
    said = worker.output()
    # uvicorn ends by the signal it stopped for once it has stopped (a service manager
    # counts a SIGTERM it sent as a clean stop); Ctrl+C is exit 0.
    assert code in (0, -signal.SIGTERM if how == "SIGTERM" else 0), said
    assert not [word for word in NOT_SAID if word in said], said
    record = control.read_control(store, "public/default/echo")
    assert record is not None and record.state == control.SUSPENDED, said
