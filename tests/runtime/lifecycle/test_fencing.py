"""Runs are fenced by epoch: a newer run of the same function makes the older one's commits fail.

A second ``localrun`` of the same FQFN begins a run (a new epoch) before it
starts its query; here the test begins it through the same control API, so
the first run, still running on the shared SparkSession, is the stale one.
Its next commit must fail, be recorded, and leave no output behind.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkfn.api.errors import StaleRunError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.group import members
from sparkfn.runtime.group.commit import GroupCommitter
from sparkfn.runtime.group.task import SliceResult
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.staging import FunctionBatch
from sparkfn.runtime.status import function_status
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.append import MessageColumns
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.log import stage
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def _count(store: Store, topic: str) -> int:
    consumer = Consumer(store, topic, initial_position="earliest")
    total = 0
    while batch := consumer.receive(max_messages=10_000):
        total += len(batch)
    return total


def test_an_older_run_cannot_commit_after_a_newer_one_began(spark: Any, store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", schema_type="string")
    admin.create("out", schema_type="string")
    config = FunctionConfig.build(
        name="fenced",
        py=str(ROOT / "examples" / "exclamation.py"),
        inputs=["in"],
        output="out",
        processing_guarantees="effectively_once",
        subscription_position="earliest",
        trigger_interval=0.2,
    )
    producer = Producer(store, "in")
    with FunctionRun(config, store=store, spark=spark) as old:
        old.start()
        producer.send_batch([Message(b"before")])
        old.wait_for(lambda: _count(store, "out") == 1, 60, "the first output")

        newer = control.begin_run(store, config.fqfn, "function", 1, "a second localrun")
        producer.send_batch([Message(b"after")])
        assert old.supervisor is not None and old.supervisor.wait(60), "not fenced within 60 s"

        assert _count(store, "out") == 1  # the stale run's batch left nothing behind
        with pytest.raises(StaleRunError, match=f"replaced by a newer run \\(epoch {newer}\\)"):
            old.wait(timeout=1)
        # The newer run's record is untouched: no death, not ended by the stale run.
        record = control.read_control(store, config.fqfn)
        assert record is not None and record.epoch == newer
        assert not any(r.dead for r in record.instances.values())


def test_the_commit_of_a_stale_epoch_fails_and_is_recorded(store: Store) -> None:
    """The commit's own check, in its transaction: whatever the supervisor noticed or not."""
    admin = TopicAdmin(store)
    admin.create("in", schema_type="string")
    admin.create("out", schema_type="string")
    config = FunctionConfig.build(
        name="stale", py="f.py", inputs=["in"], output="out", subscription_position="earliest"
    )
    old = control.begin_run(store, config.fqfn, "function", 1, "first run")
    members.join(store, "fencing", config.fqfn, config, epoch=old, version="v1")
    Producer(store, "in").send_batch([Message(b"x")])
    with store.write() as conn:
        subscription.plan_batch(
            conn,
            config.subscription,
            [admin.get("in")],
            "earliest",
            epoch=old,
            spark_start="{}",
            spark_end="{}",
            ends={(admin.get("in").id, 0): 1},
            owner=config.fqfn,
        )
    newer = control.begin_run(store, config.fqfn, "function", 1, "second run")
    staged = stage(store, admin.get("out"), 0, _one_message())
    part = SliceResult(
        config.fqfn, old, config.model_dump_json(), FunctionBatch([("out", staged)], [])
    )
    GroupCommitter(store.url, str(store.data_dir), "fencing").commit(
        {(config.fqfn, old): [part]}, 0
    )

    with store.read() as conn:
        assert subscription.cursors(conn, config.subscription) == {(admin.get("in").id, 0): 0}
    assert _count(store, "out") == 0
    status = function_status(store, config.fqfn, 1).instances[0].status
    assert status.num_system_exceptions == 1
    refusal = status.latest_system_exceptions[0]
    assert refusal.type == "StaleRunError"
    assert f"a newer run (epoch {newer})" in refusal.message


def _one_message() -> pa.Table:
    columns = MessageColumns()
    columns.add(b"late", None, None, None, None)
    return columns.table(None, datetime.now(UTC))
