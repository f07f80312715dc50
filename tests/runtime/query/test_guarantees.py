"""Processing guarantees under SIGKILL, on the real runtime, on SQLite and PostgreSQL.

One child process (``localrun_child.py``: FunctionRun on one JVM) runs three
copies of a counting function over the same pre-filled topic, one per
guarantee (``eo``, ``alo``, ``amo``), each with its own output topic,
checkpoint and state. The child's process group is SIGKILLed in the middle
of the stream, twice (a child per kill), and the three are restarted on the
same data until the input is drained; then outputs, counters and stats are
counted. The last restart, which is not killed, runs on the test's own
SparkSession: a driver that has never seen these queries, like a third
child, without paying for a third JVM.

The input: 2 partitions x 400 messages, ``max_records_per_batch=100``, so
batch ``b`` is offsets ``[50b, 50b+50)`` of each partition (batches 0..7).
Hooks in the function (``hold_at``/``wait_at``, see
``funcs/guarantee_counter.py``) and the sink's fault hook
(``SPARKFN_TEST_KILL_AFTER_SINK_COMMIT``: SIGKILL the driver's group right
after the sink's transaction for batch N committed, before Spark records
the batch) pin each kill to a known point, so every outcome is exact:

===  ==================================================  ======================================
run  how it ends                                         each function at the kill
===  ==================================================  ======================================
1    eo, alo hold inside batch 2; amo waits for them,    amo: batch 3 committed, not recorded;
     then its sink commits batch 3 and the hook kills    eo, alo: batch 2 in flight, uncommitted
2    alo, amo hold inside batch 5; eo waits for them,    eo: batch 5 committed, not recorded;
     then its sink commits batch 5 and the hook kills    alo, amo: batch 5 in flight, uncommitted
3    runs to the end (in the test process)
===  ==================================================  ======================================

Asserted: ``effectively_once`` has every output and counter increment
exactly once (its committed batch 5, replayed by Spark, is skipped);
``at_least_once`` misses nothing; ``at_most_once`` duplicates nothing, keeps
its committed batch 3 (the replay is planned empty and its id is already
recorded), and has lost exactly batch 5, in flight when it was killed: the
reader claimed that batch's end offsets when it planned it, so Spark's
replay after the restart is recognised and planned empty.
"""

from __future__ import annotations

import collections
import contextlib
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
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.status import function_status
from sparkfn.state.store import all_state
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark.commit import KILL_AFTER_COMMIT_ENV

HERE = Path(__file__).resolve().parents[1]  # tests/runtime: the child and the functions
CHILD = HERE / "localrun_child.py"
COUNTER = HERE / "funcs" / "guarantee_counter.py"

PARTITIONS = 2
PER_PARTITION = 400
PER_BATCH = 100  # max_records_per_batch: 50 from each partition
SLICE = PER_BATCH // PARTITIONS
GUARANTEES = {"eo": "effectively_once", "alo": "at_least_once", "amo": "at_most_once"}
CHILD_TIMEOUT = 240.0

pytestmark = [pytest.mark.slow, pytest.mark.long_running(90)]


def _value(partition: int, offset: int) -> str:
    return f"m-{partition}-{offset:03d} w{offset % 7} v{(offset + partition) % 3}"


def _message_id(batch: int, within: int, partition: int = 0) -> str:
    return f"{partition}:{batch * SLICE + within}"


def _inputs(skip_batches: frozenset[int] = frozenset()) -> list[str]:
    return [
        _value(p, o)
        for p in range(PARTITIONS)
        for o in range(PER_PARTITION)
        if o // SLICE not in skip_batches
    ]


def _expected_counters(inputs: list[str]) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for value in inputs:
        counts.update(value.split())
    counts["messages"] = len(inputs)
    return counts


def _fill(store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=PARTITIONS, schema_type="string")
    for name in GUARANTEES:
        admin.create(f"out-{name}", partitions=PARTITIONS, schema_type="string")
    producer = Producer(store, "in")
    for p in range(PARTITIONS):
        producer.send_batch(
            [Message(_value(p, o).encode()) for o in range(PER_PARTITION)], partition=p
        )


def _outputs(store: Store, name: str) -> collections.Counter[str]:
    consumer = Consumer(store, f"out-{name}", initial_position="earliest")
    out: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        out.update(m.value.decode() for m in batch if m.value is not None)
    return out


def _counters(store: Store, name: str) -> collections.Counter[str]:
    state = all_state(store, f"public/default/{name}")
    return collections.Counter({k: s.counter for k, s in state.items() if s.counter})


def _received(store: Store, name: str) -> int:
    status = function_status(store, f"public/default/{name}", 1)
    return int(status.instances[0].status.num_received)


# --- the child process ---------------------------------------------------------


def _config_fields(name: str, user_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "py": str(COUNTER),
        "classname": "guarantee_counter.GuaranteeCounter",
        "inputs": ["in"],
        "output": f"out-{name}",
        "subscription_position": "earliest",
        "processing_guarantees": GUARANTEES[name],
        "max_records_per_batch": PER_BATCH,
        "user_config": user_config,
    }


class Child:
    """One run of ``localrun_child.py`` in a session of its own (the JVM joins it)."""

    def __init__(
        self,
        tmp: Path,
        store: Store,
        run: int,
        user_configs: dict[str, dict[str, Any]],
        env: dict[str, str] | None = None,
    ) -> None:
        spec = {
            "store_url": store.url,
            "data_dir": str(store.data_dir),
            "master": "local[4]",  # up to three tasks block in holds at once
            "functions": [_config_fields(n, user_configs.get(n, {})) for n in GUARANTEES],
        }
        spec_path = tmp / f"spec-{run}.json"
        spec_path.write_text(json.dumps(spec))
        self.log = tmp / f"child-{run}.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(CHILD), str(spec_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text()[-6000:]

    def wait(self) -> int:
        try:
            code = self.proc.wait(timeout=CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"child did not end within {CHILD_TIMEOUT} s:\n{self.output()}")
        self._kill_leftovers()
        return code

    def kill(self) -> None:
        """SIGKILL the child's process group, then anything left in its session."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        # Spark's Python workers may sit in process groups of their own, but
        # they stay in the child's session: end them by id, so the next run
        # starts clean.
        for pid in session_processes(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _hold(tmp: Path, run: int, name: str, at: str) -> dict[str, Any]:
    return {"hold_at": at, "hold_file": str(tmp / f"hold-{run}-{name}")}


def _counts(store: Store) -> dict[str, int]:
    return {name: sum(_outputs(store, name).values()) for name in GUARANTEES}


def _run_to_end(spark: Any, store: Store) -> None:
    """Restart the three functions on ``spark`` and drain the input."""
    with contextlib.ExitStack() as runs:
        started = [
            runs.enter_context(
                FunctionRun(FunctionConfig.build(**_config_fields(n, {})), store=store, spark=spark)
            ).start(until_drained=True)
            for n in GUARANTEES
        ]
        for run in started:
            drained = run.wait(timeout=CHILD_TIMEOUT)  # raises if the function failed
            assert drained, f"{run.config.fqfn} did not drain within {CHILD_TIMEOUT} s"


@pytest.mark.backend("postgresql")
def test_guarantees_survive_sigkill(spark: Any, store: Store, tmp_path: Path) -> None:
    _fill(store)

    # Run 1: eo and alo hold in batch 2; amo waits for them, commits batch 3, the hook kills.
    holds = {n: _hold(tmp_path, 1, n, _message_id(batch=2, within=20)) for n in ("eo", "alo")}
    amo_waits = {
        "wait_at": _message_id(batch=3, within=20),
        "wait_for": [h["hold_file"] for h in holds.values()],
    }
    child = Child(tmp_path, store, 1, {**holds, "amo": amo_waits}, {KILL_AFTER_COMMIT_ENV: "3"})
    assert child.wait() == -signal.SIGKILL, child.output()
    assert _counts(store) == {"eo": 200, "alo": 200, "amo": 400}, child.output()

    # Run 2: alo and amo hold in batch 5; eo waits for them, commits batch 5, the hook kills.
    holds = {n: _hold(tmp_path, 2, n, _message_id(batch=5, within=20)) for n in ("alo", "amo")}
    eo_waits = {
        "wait_at": _message_id(batch=5, within=10),
        "wait_for": [h["hold_file"] for h in holds.values()],
    }
    child = Child(tmp_path, store, 2, {**holds, "eo": eo_waits}, {KILL_AFTER_COMMIT_ENV: "5"})
    assert child.wait() == -signal.SIGKILL, child.output()
    # eo/alo replayed batch 2; amo's replay of batch 3 (committed) was planned empty.
    assert _counts(store) == {"eo": 600, "alo": 500, "amo": 500}, child.output()

    # Run 3: to the end of the input.
    _run_to_end(spark, store)

    every = _inputs()
    expected = collections.Counter(v + "!" for v in every)

    # effectively_once: exactly once, outputs and state; stats count each message once.
    assert _outputs(store, "eo") == expected
    assert _counters(store, "eo") == _expected_counters(every)
    assert _received(store, "eo") == len(every)

    # at_least_once: nothing missing, in outputs or counters.
    alo = _outputs(store, "alo")
    assert not [v for v in expected if alo[v] < 1]
    alo_counters = _counters(store, "alo")
    assert all(alo_counters[k] >= n for k, n in _expected_counters(every).items())

    # at_most_once: nothing twice; the batch in flight (uncommitted) at a kill is gone.
    amo = _outputs(store, "amo")
    assert max(amo.values()) == 1
    kept = _inputs(skip_batches=frozenset({5}))
    assert amo == collections.Counter(v + "!" for v in kept)
    amo_counters = _counters(store, "amo")
    assert amo_counters == _expected_counters(kept)
    assert all(amo_counters[k] <= n for k, n in _expected_counters(every).items())
    assert _received(store, "amo") == len(kept)
