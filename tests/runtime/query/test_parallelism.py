"""Parallelism and subscription types on the real runtime (in-process Spark, both stores).

``funcs/instance_probe.py`` tags every output with the message id and the
instance that processed it, and counts out-of-order arrivals in state. The
output topics have one partition, so the order in which outputs were
committed is the order they are read back.
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.status import FunctionInstanceStatusData
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

PROBE = Path(__file__).resolve().parents[1] / "funcs" / "instance_probe.py"

pytestmark = pytest.mark.slow


def _config(parallelism: int, subscription_type: str, **extra: Any) -> FunctionConfig:
    return FunctionConfig.build(
        # A fresh name per run: Spark reuses Python workers, and with them
        # the function objects of earlier tests.
        name=f"probe-{uuid.uuid4().hex[:8]}",
        py=str(PROBE),
        classname="instance_probe.InstanceProbe",
        inputs=["in"],
        output="out",
        subscription_position="earliest",
        parallelism=parallelism,
        subscription_type=subscription_type,
        **extra,
    )


def _run(spark: Any, store: Store, config: FunctionConfig) -> FunctionRun:
    run = FunctionRun(config, store=store, spark=spark)
    run.start(until_drained=True)
    assert run.wait(180), "the function did not drain its input within 180 s"
    return run


def _outputs(store: Store) -> list[tuple[str | None, str, int, str]]:
    """``(key, message id, instance, input)`` per output, in commit order."""
    consumer = Consumer(store, "out", initial_position="earliest")
    out = []
    while batch := consumer.receive(max_messages=10_000):
        for m in batch:
            assert m.value is not None
            key, message_id, instance, value = m.value.decode().split("|", 3)
            out.append((None if key == "None" else key, message_id, int(instance), value))
    return out


def _instance_status(run: FunctionRun) -> dict[int, FunctionInstanceStatusData]:
    return {i.instance_id: i.status for i in run.status().instances}


def test_parallelism_4_uses_4_instances(spark: Any, store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=4, schema_type="string")
    admin.create("out", partitions=1, schema_type="string")
    producer = Producer(store, "in")
    for p in range(4):
        producer.send_batch([Message(f"p{p}-{i}".encode()) for i in range(100)], partition=p)

    run = _run(spark, store, _config(4, "shared", max_records_per_batch=200))

    outputs = _outputs(store)
    assert sorted(v for *_, v in outputs) == sorted(
        f"p{p}-{i}" for p in range(4) for i in range(100)
    )
    status = _instance_status(run)
    assert sorted(status) == [0, 1, 2, 3]
    by_instance = collections.Counter(instance for _, _, instance, _ in outputs)
    for instance_id, s in status.items():
        assert s.num_received > 0, f"instance {instance_id} received nothing: {status}"
        assert s.num_received == s.num_successfully_processed == by_instance[instance_id]
        assert s.state == "STOPPED" and s.num_user_exceptions == 0
    assert sum(s.num_received for s in status.values()) == 400
    stats = run.stats()
    assert stats.received_total == stats.processed_successfully_total == 400
    assert [i.metrics.received_total for i in stats.instances] == [
        status[i].num_received for i in range(4)
    ]


def test_key_shared_keeps_per_key_order(spark: Any, store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", partitions=1, schema_type="string")
    keys = [f"k{i}" for i in range(12)]
    per_key = 30
    producer = Producer(store, "in")
    # Keys interleaved, several produce calls: each key's messages are spread
    # over many batches and share every batch with other keys.
    for seq in range(0, per_key, 5):
        producer.send_batch(
            [Message(f"{key}:{s}".encode(), key=key) for s in range(seq, seq + 5) for key in keys]
        )

    config = _config(3, "key_shared", max_records_per_batch=50, user_config={"order_by": "key"})
    run = _run(spark, store, config)

    outputs = _outputs(store)
    assert len(outputs) == len(keys) * per_key
    seqs: dict[str, list[int]] = collections.defaultdict(list)
    owners: dict[str, set[int]] = collections.defaultdict(set)
    for key, _, instance, value in outputs:
        assert key is not None
        seqs[key].append(int(value.rsplit(":", 1)[1]))
        owners[key].add(instance)
    for key in keys:
        assert seqs[key] == list(range(per_key)), f"key {key} out of order: {seqs[key]}"
        assert len(owners[key]) == 1, f"key {key} went to several instances: {owners[key]}"
    assert len(set().union(*owners.values())) > 1, "all keys went to one instance"
    assert run.get_counter("out_of_order") == 0
    for key in keys:
        assert run.get_state(f"last/key/{key}") == str(per_key - 1).encode()
    batches = run.query.lastProgress["batchId"] + 1
    assert batches >= (len(keys) * per_key) // 50, f"expected several batches, got {batches}"
    status = _instance_status(run)
    assert sum(s.num_received for s in status.values()) == len(keys) * per_key


def test_failover_keeps_partition_order(spark: Any, store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=4, schema_type="string")
    admin.create("out", partitions=1, schema_type="string")
    producer = Producer(store, "in")
    per_partition = 60
    for first in range(0, per_partition, 20):
        for p in range(4):
            producer.send_batch(
                [Message(f"p{p}-{i}".encode()) for i in range(first, first + 20)], partition=p
            )

    config = _config(2, "failover", max_records_per_batch=40, user_config={"order_by": "partition"})
    run = _run(spark, store, config)

    outputs = _outputs(store)
    assert len(outputs) == 4 * per_partition
    offsets: dict[int, list[int]] = collections.defaultdict(list)
    owners: dict[int, set[int]] = collections.defaultdict(set)
    for _, message_id, instance, value in outputs:
        partition, offset = (int(x) for x in message_id.split(":"))
        assert value == f"p{partition}-{offset}"
        offsets[partition].append(offset)
        owners[partition].add(instance)
    for p in range(4):
        assert offsets[p] == list(range(per_partition)), f"partition {p} out of order"
        assert len(owners[p]) == 1, f"partition {p} was split over instances {owners[p]}"
    assert set().union(*owners.values()) == {0, 1}
    assert run.get_counter("out_of_order") == 0
    status = _instance_status(run)
    for instance_id, s in status.items():
        owned = [p for p in range(4) if owners[p] == {instance_id}]
        assert s.num_received == per_partition * len(owned)
