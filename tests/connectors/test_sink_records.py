"""A sink's lifecycle records are its own, even when a function has the same FQFN.

A function and a sink named alike run at the same time on the shared
SparkSession (the function with a subscription of its own: the default one,
``tenant/namespace/name``, would be shared). The sink dies of a ``write()``
that raises (fatal: ``SHUTDOWN_FUNCTION``); the function must not notice:
it is not fenced by the sink's run, its objects are not closed by the sink's
commands, and its record shows no death. Both stores.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from sparkfn.api.errors import ConnectorFailedError
from sparkfn.config.connector import SinkConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.connectors.sink.sink_run import SinkRun
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.metrics_store import instance_totals
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import WAIT

ROOT = Path(__file__).resolve().parents[2]
RECORDING = str(ROOT / "tests" / "connectors" / "sinks" / "recording_sink.py")
pytestmark = pytest.mark.slow


def _count(store: Store, topic: str) -> int:
    return sum(p.messages for p in TopicAdmin(store).stats(topic))


def _send(store: Store, topic: str, values: list[str]) -> None:
    Producer(store, topic).send_batch([Message(v.encode()) for v in values])


def _object_runs(store: Store, name: str) -> set[str]:
    """The control ids under which user objects of ``name`` were recorded."""
    objects = schema.function_objects
    with store.read() as conn:
        ids = conn.execute(select(objects.c.fqfn).where(objects.c.fqfn.contains(name))).scalars()
        return set(ids)


def test_a_function_and_a_sink_of_the_same_fqfn_keep_separate_records(
    spark: Any, store: Store, tmp_path: Path
) -> None:
    admin = TopicAdmin(store)
    for topic in ("fn-in", "fn-out", "sink-in"):
        admin.create(topic, partitions=1, schema_type="string")
    name = f"twin-{uuid.uuid4().hex[:8]}"  # fresh: Spark keeps Python workers between tests
    function = FunctionConfig.build(
        name=name,
        py=str(ROOT / "examples" / "exclamation.py"),
        inputs=["fn-in"],
        output="fn-out",
        subscription_name=f"{name}-function",
        subscription_position="earliest",
        trigger_interval=0.2,
    )
    sink = SinkConfig.build(
        name=name,
        py=RECORDING,
        inputs=["sink-in"],
        max_records_per_batch=5,
        configs={
            "log": str(tmp_path / "calls.jsonl"),
            "path": str(tmp_path / "out.jsonl"),
            "fatal_on": "m7",
        },
        subscription_position="earliest",
    )
    fqfn = function.fqfn
    sink_id = control.control_id("sink", fqfn)
    assert sink_id != fqfn

    with FunctionRun(function, store=store, spark=spark) as run:
        run.start()
        _send(store, "fn-in", [f"a{i}" for i in range(10)])
        run.wait_for(lambda: _count(store, "fn-out") == 10, 90, "the function's first outputs")

        _send(store, "sink-in", [f"m{i}" for i in range(20)])
        with SinkRun(sink, store=store, spark=spark) as sink_run:
            sink_run.start(until_drained=True)
            with pytest.raises(ConnectorFailedError, match="cannot write m7"):
                sink_run.wait(WAIT)
            assert sink_run.run_state == control.ERROR

        # The function ran on through the sink's start, death and shutdown.
        assert run.run_state == control.RUNNING
        _send(store, "fn-in", [f"b{i}" for i in range(5)])
        run.wait_for(lambda: _count(store, "fn-out") == 15, 90, "the function's later outputs")
        assert run.drain(WAIT)
        assert run.run_state == control.STOPPED

    function_record = control.read_control(store, fqfn)
    sink_record = control.read_control(store, sink_id)
    assert function_record is not None and sink_record is not None
    assert (function_record.state, sink_record.state) == (control.STOPPED, control.ERROR)
    assert function_record.epoch == sink_record.epoch == 1  # neither run fenced the other
    assert not any(r.dead or r.death for r in function_record.instances.values())
    assert function_record.instances[0].fatal_exceptions == 0
    sink_death = sink_record.instances[0].death
    assert sink_death is not None and (sink_death.type, sink_death.message) == (
        "RuntimeError",
        "cannot write m7",
    )
    assert sink_record.instances[0].fatal_exceptions == 1

    function_moves = [t for t in control.transitions_of(store, fqfn) if t["instance"] is None]
    sink_moves = [t for t in control.transitions_of(store, sink_id) if t["instance"] is None]
    assert [t["to"] for t in function_moves][-2:] == ["STOPPING", "STOPPED"]
    assert control.ERROR not in {t["to"] for t in function_moves}
    assert sink_moves[-1]["to"] == control.ERROR
    assert "SHUTDOWN_FUNCTION" in sink_moves[-1]["cause"]

    # Objects and stats too: each run's under its own id.
    assert _object_runs(store, name) == {fqfn, sink_id}
    function_totals, sink_totals = instance_totals(store, fqfn), instance_totals(store, sink_id)
    assert function_totals[0]["processed_successfully"] == 15
    assert sink_totals[0]["processed_successfully"] == 5  # m0..m4; the batch of m7 never committed
