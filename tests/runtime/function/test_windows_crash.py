"""A window function SIGKILLed mid-window, twice, then restarted: every window exactly once.

``effectively_once``, count windows of 5 over 60 messages in one partition,
batches of 7 (``max_records_per_batch``): windows straddle batches, so each
crash leaves messages of an unfinished window in the function's state.

===  =====================================================  =======================================
run  how it ends                                            committed at the kill
===  =====================================================  =======================================
1    the window of m-20..m-24 holds in batch 3 (m-21..27)   batches 0-2: windows m-00..m-19, and
     until the test kills the child                         m-20 waiting in the state
2    batch 5 commits; the sink's hook kills the child       through batch 5 (m-41): windows to
     before Spark records it                                m-39, m-40..41 waiting; Spark replays 5
3    to the end (in the test's own process)
===  =====================================================  =======================================

Asserted: the twelve windows, each once, each with exactly its five
messages, in order; nothing left waiting.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sessions import session_processes
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.window import Pane, state_key
from sparkfn.state.store import get_state
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark.commit import KILL_AFTER_COMMIT_ENV
from waiting import until

HERE = Path(__file__).resolve().parents[1]  # tests/runtime: the child and the functions
CHILD = HERE / "localrun_child.py"
FUNCS = HERE / "funcs" / "windows.py"
TOTAL, LENGTH, PER_BATCH = 60, 5, 7
CHILD_TIMEOUT = 240.0

pytestmark = [pytest.mark.slow, pytest.mark.long_running(60)]


def _value(i: int) -> str:
    return f"m-{i:02d}"


def _fields(user_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "crashing",
        "py": str(FUNCS),
        "classname": "windows.Holding",
        "inputs": ["in"],
        "output": "out",
        "subscription_position": "earliest",
        "processing_guarantees": "effectively_once",
        "max_records_per_batch": PER_BATCH,
        "window_config": {"windowLengthCount": LENGTH},
        "user_config": user_config,
    }


def _child(
    tmp: Path, store: Store, run: int, user_config: dict[str, Any], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    spec = {
        "store_url": store.url,
        "data_dir": str(store.data_dir),
        "master": "local[2]",
        "functions": [_fields(user_config)],
    }
    path = tmp / f"spec-{run}.json"
    path.write_text(json.dumps(spec))
    with (tmp / f"child-{run}.log").open("w") as log:
        return subprocess.Popen(
            [sys.executable, str(CHILD), str(path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )


def _end(proc: subprocess.Popen[bytes], *, kill: bool) -> int:
    if kill:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        code = proc.wait(timeout=CHILD_TIMEOUT)
    finally:
        for pid in session_processes(proc.pid):  # Spark's workers, in groups of their own
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return code


def _windows(store: Store) -> list[str]:
    consumer = Consumer(store, "out", initial_position="earliest")
    out: list[str] = []
    while batch := consumer.receive(max_messages=10_000, timeout=0.2):
        out.extend(m.value.decode() for m in batch if m.value is not None)
    return out


def _log(tmp: Path, run: int) -> str:
    return (tmp / f"child-{run}.log").read_text()[-4000:]


@pytest.mark.backend("postgresql")
def test_windows_survive_sigkill_exactly_once(
    run_until_drained: Any, store: Store, tmp_path: Path
) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=1, schema_type="string")
    admin.create("out", partitions=1, schema_type="string")
    Producer(store, "in").send_batch([Message(_value(i).encode()) for i in range(TOTAL)])
    expected = [
        ",".join(_value(i) for i in range(w, w + LENGTH)) + "|-" for w in range(0, TOTAL, LENGTH)
    ]

    # Run 1: killed while the window m-20..m-24 is being processed.
    hold = tmp_path / "hold-1"
    proc = _child(tmp_path, store, 1, {"hold_value": _value(23), "hold_file": str(hold)}, {})

    def holding() -> bool:
        assert proc.poll() is None, _log(tmp_path, 1)
        return hold.exists()

    until(holding, lambda: f"the child to hold m-23:\n{_log(tmp_path, 1)}", CHILD_TIMEOUT)
    assert _end(proc, kill=True) == -signal.SIGKILL
    assert _windows(store) == expected[:4]
    pane = Pane.load(get_state(store, "public/default/crashing", state_key(0)).value)  # type: ignore[union-attr]
    assert [h[1] for h in pane.held] == [b"m-20"]

    # Run 2: batch 5 commits, and the child dies before Spark records it.
    proc = _child(tmp_path, store, 2, {}, {KILL_AFTER_COMMIT_ENV: "5"})
    assert _end(proc, kill=False) == -signal.SIGKILL, _log(tmp_path, 2)
    assert _windows(store) == expected[:8], _log(tmp_path, 2)

    # Run 3: Spark replays batch 5 (committed: skipped), then the rest.
    run_until_drained(FunctionConfig.build(**_fields({})), store)
    assert _windows(store) == expected
    pane = Pane.load(get_state(store, "public/default/crashing", state_key(0)).value)  # type: ignore[union-attr]
    assert pane.held == []
    assert pane.since_fire == 0
