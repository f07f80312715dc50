"""``run_function``: the body of the ``mapInArrow`` stage, on Spark executors.

For each Spark task it runs the user function over the input rows of every
instance present in the task and yields *tagged rows*: ``output``,
``publish``, ``dead_letter`` and ``log`` messages for topics, and one
``summary`` row per instance carrying the task's state mutations and stats.
The function sink commits all of them in one transaction per batch.

User objects live in :data:`_INSTANCES`, one per (function, version, instance)
per Python worker process, created and initialized on first use, so a
reused worker keeps its objects across batches.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkfn.config.function import FunctionConfig, SubscriptionType
from sparkfn.runtime.instance import EmitBuffer, FunctionInstance, InputRows, TaskResult
from sparkfn.runtime.loader import load_function
from sparkfn.state.store import state_reader
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import PROPERTIES, TIMESTAMP, SchemaType

TAGGED_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("key", pa.string()),
        pa.field("value", pa.binary()),
        pa.field("properties", PROPERTIES),
        pa.field("event_time", TIMESTAMP),
        pa.field("instance_id", pa.int32()),
        pa.field("payload", pa.binary()),
    ]
)

SPARK_TAGGED_SCHEMA = (
    "kind string, topic string, key string, value binary, properties map<string,string>, "
    "event_time timestamp, instance_id int, payload binary"
)

_INSTANCES: dict[tuple[str, str, int], FunctionInstance] = {}
_ORIGINS: dict[tuple[str, str, int], str] = {}  # the store each instance was loaded for


@dataclass(frozen=True)
class TaskSummary:
    """The non-message part of a :class:`TaskResult`, shipped to the sink."""

    instance_id: int
    mutations: list[Any]
    stats: Any


def instance_for(
    config: FunctionConfig, instance_id: int, store: Store, version: str
) -> FunctionInstance:
    """The process-wide instance object, loaded on first use."""
    key = (config.fqfn, version, instance_id)
    origin = f"{store.url} {store.data_dir}"
    inst = _INSTANCES.get(key)
    if inst is not None and (inst.config != config or _ORIGINS.get(key) != origin):
        # The same name now means another function (re-created with another
        # config, or in another store): the old object is replaced, so closed.
        inst.close()
        inst = None
    if inst is None:
        admin = TopicAdmin(store)
        cache: dict[str, SchemaType] = {}

        def schema_of(topic: str) -> SchemaType:
            if topic not in cache:
                cache[topic] = admin.get(topic).schema_type
            return cache[topic]

        inst = FunctionInstance(config, instance_id, load_function(config), schema_of, version)
        _INSTANCES[key] = inst
        _ORIGINS[key] = origin
    return inst


def emitted_batch(buffer: EmitBuffer, instance_id: int) -> pa.RecordBatch:
    """Tagged rows for the messages in ``buffer``."""
    n = len(buffer)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(buffer.kind, pa.string()),
            pa.array(buffer.topic, pa.string()),
            pa.array(buffer.key, pa.string()),
            pa.array(buffer.value, pa.binary()),
            pa.array(buffer.properties, PROPERTIES),
            pa.array(buffer.event_time, TIMESTAMP),
            pa.repeat(pa.scalar(instance_id, pa.int32()), n),
            pa.nulls(n, pa.binary()),
        ],
        schema=TAGGED_SCHEMA,
    )


def summary_batch(result: TaskResult) -> pa.RecordBatch:
    """One ``summary`` row: the task's state mutations and stats, pickled."""
    payload = pickle.dumps(TaskSummary(result.instance_id, result.mutations, result.stats))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(["summary"]),
            pa.nulls(1, pa.string()),
            pa.nulls(1, pa.string()),
            pa.nulls(1, pa.binary()),
            pa.nulls(1, PROPERTIES),
            pa.nulls(1, TIMESTAMP),
            pa.array([result.instance_id], pa.int32()),
            pa.array([payload], pa.binary()),
        ],
        schema=TAGGED_SCHEMA,
    )


def make_run_function(
    config: FunctionConfig, store_url: str, data_dir: str, version: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function ``mapInArrow`` calls once per task (pickled to executors)."""

    sort_input = config.subscription_type is SubscriptionType.KEY_SHARED

    def run_function(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        store = Store.cached(store_url, data_dir)
        active: dict[int, FunctionInstance] = {}
        if sort_input:
            batches = _in_offset_order(batches)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ids_col = batch.column(batch.schema.get_field_index("instance_id"))
            ids = pc.unique(ids_col).to_pylist()
            for instance_id in ids:
                part = batch if len(ids) == 1 else batch.filter(pc.equal(ids_col, instance_id))
                inst = active.get(instance_id)
                if inst is None:
                    inst = instance_for(config, instance_id, store, version)
                    inst.begin_task(state_reader(store, config.fqfn))
                    active[instance_id] = inst
                if inst.user.vectorized:
                    inst.process_batch(part)
                else:
                    inst.process_rows(InputRows(part))
                out = inst.take_output()
                if len(out):
                    yield emitted_batch(out, instance_id)
        for instance_id, inst in active.items():
            result = inst.end_task()
            if len(result.emitted):
                yield emitted_batch(result.emitted, instance_id)
            yield summary_batch(result)

    return run_function


def _in_offset_order(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The task's rows sorted by instance, topic, partition, offset.

    After ``key_shared``'s shuffle a task receives rows in fetch order, not
    offset order; streaming frames cannot be sorted by Spark, so the task
    sorts what it received (one micro-batch's share, bounded by admission).
    """
    received = [b for b in batches if b.num_rows]
    if not received:
        return
    table = pa.Table.from_batches(received)
    keys = [
        ("instance_id", "ascending"),
        ("topic", "ascending"),
        ("partition", "ascending"),
        ("offset", "ascending"),
    ]
    yield from table.sort_by(keys).combine_chunks().to_batches()
