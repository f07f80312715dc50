"""An instance stopped alone and the batches around its stop, without Spark.

An instance's drain or suspend records it ``STOPPING``, then waits for the
batch planned last (docs/lifecycle.md, "One instance"). A batch whose
offsets Spark took before that, but whose plan is recorded after, deals the
instance nothing: the group's reader reads the instances again in the
transaction that records the plan. Otherwise its task would reach the
instance after its objects were closed and it was reported ``STOPPED``.
Should a task reach a stopping or stopped instance all the same, it gets a
new object, processes its rows (nothing is lost) and closes it gracefully
when it ends, so no object of a stopped instance stays open and none is
called after ``close()``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group import members
from sparkfn.runtime.group.reader import GroupStreamReader
from sparkfn.runtime.group.solo import solo_group
from sparkfn.runtime.lifecycle import control, objects
from sparkfn.runtime.query.executor import TaskSummary, close_all, make_run_function
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark.planning import TopicRange
from sparkfn.topics.spark.rows import TaskRows

FUNCS = Path(__file__).resolve().parents[1] / "funcs"


def _rows(store: Store, instance: int, lo: int, hi: int) -> list[pa.RecordBatch]:
    topic = TopicAdmin(store).get("in")
    rows = TaskRows(store.url, str(store.data_dir), None, properties_json=False)
    return list(rows.rows(TopicRange(topic, 0, lo, hi, instance, (0, 1))))


def test_a_task_reaching_an_instance_stopped_alone_closes_its_new_object_gracefully(
    data_dir: Path, tmp_path: Path
) -> None:
    store = Store.open(None, data_dir)
    try:
        TopicAdmin(store).create("in", schema_type="string")
        TopicAdmin(store).create("out", schema_type="string")
        Producer(store, "in").send_batch([Message(f"m{i}".encode()) for i in range(6)])
        log = tmp_path / "calls.jsonl"
        config = FunctionConfig.build(
            name=f"rec-{uuid.uuid4().hex[:8]}",
            py=str(FUNCS / "recording.py"),
            classname="recording.Recording",
            inputs=["in"],
            output="out",
            parallelism=2,
            user_config={"log": str(log)},
        )
        cid = config.fqfn
        epoch = control.begin_run(store, cid, "function", 2, "started")
        control.set_state(store, cid, control.RUNNING, "started", [control.FUNCTION, 0, 1])
        control.set_state(store, cid, control.STOPPING, "suspend requested by user", [1])
        run = make_run_function(config, store.url, str(store.data_dir), "1", epoch, cid)

        pieces = list(run(iter([*_rows(store, 0, 0, 3), *_rows(store, 1, 3, 6)])))

        summaries = {p.instance_id: p for p in pieces if isinstance(p, TaskSummary)}
        assert set(summaries) == {0, 1}  # instance 1's rows were processed, not dropped
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        by_instance = {i: [c["call"] for c in calls if c["instance"] == i] for i in (0, 1)}
        assert by_instance[1] == [
            "initialize",
            "process",
            "process",
            "process",
            "prepare_to_shutdown",
            "shutdown",
            "close",
        ]
        assert "close" not in by_instance[0]  # a running instance keeps its object
        assert objects.open_objects(store, cid, [1]) == []
        assert [o.instance_id for o in objects.open_objects(store, cid, [0])] == [0]
        # What the graceful close's prepare_to_shutdown returned is appended at once.
        out = Consumer(store, "out", initial_position="earliest").receive(max_messages=100)
        assert [m.value.decode() for m in out if m.value is not None][0].startswith("final:1:")
    finally:
        close_all(store, "test over")
        store.close()


def test_a_batch_planned_as_an_instance_begins_to_stop_alone_deals_it_nothing(
    store: Store,
) -> None:
    TopicAdmin(store).create("in", partitions=4, schema_type="string")
    Producer(store, "in").send_batch([Message(f"m{i}".encode()) for i in range(12)])
    config = FunctionConfig.build(
        name=f"rec-{uuid.uuid4().hex[:8]}",
        py=str(FUNCS / "recording.py"),
        classname="recording.Recording",
        inputs=["in"],
        output="out",
        parallelism=3,
        subscription_position="earliest",
        processing_guarantees="effectively_once",
    )
    cid = config.fqfn
    epoch = control.begin_run(store, cid, "function", 3, "started")
    control.set_state(store, cid, control.RUNNING, "started", [control.FUNCTION, 0, 1, 2])
    members.join(store, solo_group(cid), cid, config, epoch=epoch, version="1")
    reader = GroupStreamReader(
        {"storeurl": store.url, "datadir": str(store.data_dir), "group": solo_group(cid)}
    )
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)  # Spark takes the offsets: instances 0, 1, 2 live
    assert end != start
    # Instance 1's suspend begins before Spark asks for the batch's partitions: it is
    # STOPPING, and no plan is there to wait for, so its objects are closed at once.
    control.set_state(store, cid, control.STOPPING, "suspend requested by user", [1])
    with store.read() as conn:
        assert subscription.read_plan(conn, config.subscription) is None

    tasks = reader.partitions(start, end)

    ranges = [p for t in tasks for s in t.slices for p in s.parts]
    assert {r.instance for r in ranges} == {0, 2}, ranges  # nothing reaches instance 1
    assert sum(r.end - r.start for r in ranges) == 12  # its share went to the others
