"""A function's position is its subscription, not Spark's checkpoint (both stores).

A run with a new, stale or lost checkpoint resumes where the last commit
left off, so every input's output appears exactly once across any sequence
of runs and checkpoints; so does a run after a SIGKILL that fell between the
sink's commit and Spark's own checkpoint write.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.query.build import checkpoint_dir
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark.commit import KILL_AFTER_COMMIT_ENV

ROOT = Path(__file__).resolve().parents[3]
CHILD = Path(__file__).resolve().parents[1] / "localrun_child.py"
EXCLAIM = str(ROOT / "examples" / "exclamation.py")

pytestmark = pytest.mark.slow


def _fields(**more: Any) -> dict[str, Any]:
    return {
        "name": "exclaim",
        "py": EXCLAIM,
        "inputs": ["in"],
        "output": "out",
        "processing_guarantees": "effectively_once",
        "subscription_position": "earliest",
        **more,
    }


def _produce(store: Store, first: int, count: int) -> None:
    Producer(store, "in").send_batch(
        [Message(f"m{i:03d}".encode()) for i in range(first, first + count)]
    )


def _outputs(store: Store) -> collections.Counter[str]:
    consumer = Consumer(store, "out", initial_position="earliest")
    out: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        out.update(m.value.decode() for m in batch if m.value is not None)
    return out


def _expected(count: int) -> collections.Counter[str]:
    return collections.Counter(f"m{i:03d}!" for i in range(count))


def _drain(spark: Any, store: Store, checkpoint: Path, **more: Any) -> None:
    config = FunctionConfig.build(**_fields(**more))
    with FunctionRun(config, store=store, spark=spark) as run:
        run.start(until_drained=True, checkpoint=checkpoint)
        assert run.wait(timeout=120), f"{config.fqfn} did not drain within 120 s"


def _setup(store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", partitions=2, schema_type="string")


def test_new_stale_and_lost_checkpoints_resume_from_the_subscription(
    spark: Any, store: Store, tmp_path: Path
) -> None:
    _setup(store)
    a, b = tmp_path / "checkpoint-a", tmp_path / "checkpoint-b"
    _produce(store, 0, 10)
    _drain(spark, store, a)
    assert _outputs(store) == _expected(10)

    _produce(store, 10, 10)
    _drain(spark, store, b)  # a new checkpoint: Spark numbers batches from 0 again
    assert _outputs(store) == _expected(20)

    _produce(store, 20, 5)
    _drain(spark, store, a)  # a stale checkpoint, behind the subscription
    assert _outputs(store) == _expected(25)

    shutil.rmtree(a)
    _produce(store, 25, 5)
    # A lost checkpoint; and subscription_position applies only to a new
    # subscription: "latest" would skip the 5 new messages if it applied.
    _drain(spark, store, a, subscription_position="latest")
    assert _outputs(store) == _expected(30)

    with store.read() as conn:
        cursors = subscription.cursors(conn, "public/default/exclaim")
    assert sum(cursors.values()) == 30


@pytest.mark.long_running(45)
def test_sigkill_after_commit_then_a_lost_checkpoint_counts_every_output_once(
    spark: Any, store: Store, tmp_path: Path
) -> None:
    _setup(store)
    _produce(store, 0, 40)
    spec = {
        "store_url": store.url,
        "data_dir": str(store.data_dir),
        "master": "local[2]",
        "functions": [_fields(max_records_per_batch=10)],
    }
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    log = tmp_path / "child.log"
    with log.open("w") as out:
        child = subprocess.Popen(
            [sys.executable, str(CHILD), str(spec_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, KILL_AFTER_COMMIT_ENV: "1"},
            start_new_session=True,
        )
    try:
        code = child.wait(timeout=240)
    finally:
        _kill_session(child.pid)
    assert code == -signal.SIGKILL, log.read_text()[-4000:]
    assert _outputs(store) == _expected(20), log.read_text()[-4000:]  # batches 0 and 1

    # Spark's checkpoint never recorded batch 1, and now it is lost altogether.
    config = FunctionConfig.build(**_fields(max_records_per_batch=10))
    shutil.rmtree(checkpoint_dir(store, config))
    _drain(spark, store, checkpoint_dir(store, config), max_records_per_batch=10)
    assert _outputs(store) == _expected(40)


def _kill_session(sid: int) -> None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_topic_a_pattern_gains_is_read_from_its_first_message(
    spark: Any, store: Store, data_dir: Path
) -> None:
    """``latest`` is where the subscription began; a topic made later holds nothing older."""
    admin = TopicAdmin(store)
    admin.create("in-a", partitions=2, schema_type="string")
    admin.create("out", partitions=1, schema_type="string")
    Producer(store, "in-a").send_batch([Message(f"old{i}".encode()) for i in range(7)])
    fields = {
        **_fields(inputs=[], topics_pattern="public/default/in-.*"),
        "subscription_position": "latest",
    }
    config = FunctionConfig.build(**fields)
    for _ in range(2):  # the second run finds the topic made after the first
        with FunctionRun(config, store=store, spark=spark) as run:
            run.start(until_drained=True, checkpoint=data_dir / "ck")
            assert run.wait(timeout=120), "the pattern function did not drain within 120 s"
        if not admin.exists("in-b"):
            admin.create("in-b", partitions=3, schema_type="string")
            Producer(store, "in-b").send_batch([Message(f"b{i}".encode()) for i in range(20)])
            Producer(store, "in-a").send_batch([Message(f"a{i}".encode()) for i in range(5)])
    expected = [f"b{i}!" for i in range(20)] + [f"a{i}!" for i in range(5)]
    assert _outputs(store) == collections.Counter(expected)  # the 7 before it began: skipped


def test_topics_a_pattern_gains_while_it_runs_or_is_parked_are_read_whole(
    spark: Any, store: Store
) -> None:
    """Pulsar's pattern consumers find new topics while they run; so does a function's query.

    ``latest`` applies to the topics there at the start; one created while
    the query runs is read from its first message by the running query
    (its creation wakes the reader), and one created while it is parked
    wakes it.
    """
    admin = TopicAdmin(store)
    admin.create("in-a", partitions=2, schema_type="string")
    admin.create("out", partitions=1, schema_type="string")
    Producer(store, "in-a").send_batch([Message(b"before") for _ in range(3)])  # skipped: latest
    fields = {
        **_fields(inputs=[], topics_pattern="public/default/in-.*"),
        "subscription_position": "latest",
    }
    config = FunctionConfig.build(**fields)
    expected: collections.Counter[str] = collections.Counter()

    def produce(topic: str, prefix: str, count: int) -> None:
        values = [f"{prefix}{i}" for i in range(count)]
        Producer(store, topic).send_batch([Message(v.encode()) for v in values])
        expected.update(f"{v}!" for v in values)

    with FunctionRun(config, store=store, spark=spark, park_idle_after=8.0) as run:
        run.start()
        assert run.supervisor is not None
        target = run.supervisor.query_target
        run.wait_for(lambda: _subscribed(store, config.subscription), 60, "the subscription")
        produce("in-a", "a", 5)
        run.wait_for(lambda: _outputs(store) == expected, 60, "in-a's outputs")
        query = run.query
        admin.create("in-b", partitions=3, schema_type="string")
        produce("in-b", "b", 20)
        produce("in-a", "c", 2)
        run.wait_for(lambda: _outputs(store) == expected, 60, "in-b's outputs")
        assert run.query is query and not target.parked, "the running query found in-b"

        run.wait_for(lambda: target.parked, 60, "the query parked")
        admin.create("in-c", partitions=1, schema_type="string")
        produce("in-c", "d", 4)
        run.wait_for(lambda: _outputs(store) == expected, 60, "in-c's outputs")
        assert run.query is not query, "in-c woke the parked query"
        assert run.drain(120)
    assert _outputs(store) == expected  # nothing twice, "before" never


def _subscribed(store: Store, name: str) -> bool:
    with store.read() as conn:
        return bool(subscription.cursors(conn, name))
