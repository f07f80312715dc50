"""Query groups: one Spark query serves many functions (docs/architecture.md, "Groups").

A worker in this process, on the session's SparkSession and the test's
store (both backends): its functions are members of one group, so these
tests check per function what a function's own query promises: every input
one output per function, a member's failure or stop kept to that member.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group import members
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

FUNCS = Path(__file__).parent / "funcs"
WAIT = 180


@pytest.fixture
def group_worker(spark: Any, store_url: str, data_dir: Path) -> Iterator[Worker]:
    """A worker in this process whose plain functions run in its default group."""
    worker = Worker(
        WorkerSettings.resolve(data_dir=data_dir, store_url=store_url, shutdown_timeout=60),
        spark=spark,
    )
    worker.open()
    yield worker
    worker.shutdown()


def _config(name: str, **fields: Any) -> FunctionConfig:
    return FunctionConfig.build(
        name=name,
        py=str(FUNCS / "named_echo.py"),
        classname="named_echo.NamedEcho",
        inputs=fields.pop("inputs", ["in"]),
        output=fields.pop("output", "out"),
        processing_guarantees="effectively_once",
        **fields,
    )


def _values(store: Store, topic: str = "out") -> collections.Counter[str]:
    consumer = Consumer(store, topic, initial_position="earliest")
    out: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        out.update(m.value.decode() for m in batch if m.value is not None)
    return out


def _await_values(
    store: Store, expected: collections.Counter[str], topic: str = "out", timeout: float = WAIT
) -> None:
    deadline = time.monotonic() + timeout
    while (found := _values(store, topic)) != expected:
        extra = found - expected
        assert not extra, f"outputs no input asked for, or repeated: {dict(extra)}"
        missing = expected - found
        assert time.monotonic() < deadline, f"{sum(missing.values())} outputs missing: {sorted(missing)[:10]}"
        time.sleep(0.3)


def _send(store: Store, values: list[str], topic: str = "in") -> None:
    Producer(store, topic).send_batch([Message(v.encode()) for v in values])


@pytest.mark.long_running(60)
def test_fifty_functions_share_one_query_and_each_sees_every_input_once(
    group_worker: Worker,
) -> None:
    store = group_worker.open_store()
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", schema_type="string")
    names = [f"g{i:02d}" for i in range(50)]
    for name in names:
        group_worker.create(_config(name), package_digest=None, who="test")
    with store.read() as conn:
        assert [m.control_id for m in members.members(conn, "default")] == [
            f"public/default/{n}" for n in names
        ]
    sent = [f"m{i}" for i in range(20)]
    _send(store, sent[:10])
    _send(store, sent[10:])
    _await_values(store, collections.Counter(f"{n}:{v}" for n in names for v in sent))
    assert len(group_worker.spark.streams.active) == 1  # one query for all fifty
