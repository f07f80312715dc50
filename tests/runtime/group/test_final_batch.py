"""A drain's last data batch ends the stream itself, when that costs no task slots.

A drain (and ``until_drained``) ends with every live instance's
``prepare_to_shutdown()`` in a batch, whose outputs commit with it. When the
batch that reaches the drain's target can give each live instance one task
without running fewer tasks at once than its own plan would, that batch
carries the end-of-stream markers: each instance's task processes its input,
then calls the hook in the same object, and no end-of-stream batch follows.
Otherwise the markers come in a batch of their own, as before. Both paths
must process every message once and call the hooks once per object that
processed input.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from test_lifecycle import WAIT, _calls, _check_sequences, _config, _outputs, _produce
from test_parking import _reader as parked_reader

from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.group.reader import FINAL_PREFIX, GroupStreamReader
from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.spark.planning import FINAL_KEY, FinalMarker, InstanceRanges
from sparkfn.topics.spark.rows import TaskRows
from sparkfn.topics.spark.source import current_ends


def _draining(store: Store, slots: int) -> tuple[GroupStreamReader, dict[str, int], int, str]:
    """The reader of a group of one over a 4-partition topic holding 40 messages, whose run
    of 2 instances drains."""
    TopicAdmin(store).create("in", partitions=4, schema_type="string")
    _produce(store, [f"m{i}" for i in range(40)])
    config = _config(store.data_dir / "calls.jsonl", parallelism=2, max_records_per_batch=None)
    control.begin_run(store, config.fqfn, "function", 2, "test")
    reader = parked_reader(store, config, slots=slots)
    start = reader.initialOffset()
    seq = control.request_stop(store, config.fqfn, "drain", current_ends(store, ["in"]))
    return reader, start, seq, config.fqfn


def _parts(tasks: list[Any]) -> list[Any]:
    return [p for t in tasks for s in t.slices for p in s.parts]


def test_the_batch_reaching_a_drains_target_carries_the_markers(store: Store) -> None:
    reader, start, seq, cid = _draining(store, slots=2)
    end = reader.latestOffset(start, None)
    assert end[FINAL_PREFIX + cid] == seq, "the data batch ends the stream"
    parts = _parts(reader.partitions(start, end))
    assert [(p.instance, p.final) for p in parts if isinstance(p, InstanceRanges)] == [
        (0, True),
        (1, True),
    ]
    offsets = []
    rows = TaskRows(store.url, str(store.data_dir), None, False)
    for part in parts:
        assert isinstance(part, InstanceRanges)
        table = pa.Table.from_batches(list(rows.rows(part)))
        instances = set(table.column("instance_id").to_pylist())
        assert instances == {part.instance}
        read = table.column("offset").to_pylist()
        assert read[-1] == -1 and -1 not in read[:-1], "the marker comes after the data, once"
        offsets.extend(read[:-1])
    assert len(offsets) == 40
    # The batch's plan holds the data: the commit moves every cursor past it.
    with store.read() as conn:
        plan = subscription.read_plan(conn, cid)
    assert plan is not None and sum(s.end - s.start for s in plan.spans) == 40
    assert json.loads(plan.spark_end)[FINAL_PREFIX + cid] == seq


def test_fewer_instances_than_task_slots_keep_their_end_of_stream_batch(store: Store) -> None:
    reader, start, seq, cid = _draining(store, slots=8)  # 4 range tasks beat 2 instance tasks
    end = reader.latestOffset(start, None)
    assert FINAL_PREFIX + cid not in end
    parts = _parts(reader.partitions(start, end))
    assert len(parts) == 4 and not any(isinstance(p, InstanceRanges) for p in parts)
    with store.write() as conn:
        subscription.commit_plan(conn, cid, 1, owner=cid)
    final = reader.latestOffset(end, None)
    assert final[FINAL_PREFIX + cid] == seq
    markers = _parts(reader.partitions(end, final))
    assert sorted(p.instance for p in markers if isinstance(p, FinalMarker)) == [0, 1]


@pytest.mark.slow
@pytest.mark.parametrize("parallelism", [2, 1])
def test_a_drained_run_calls_each_instances_hooks_after_its_input(
    spark: Any, data_dir: Path, tmp_path: Path, parallelism: int
) -> None:
    """With 2 instances on local[2] the last batch ends the stream; with 1 it does not."""
    store = Store.open(None, data_dir)
    try:
        admin = TopicAdmin(store)
        admin.create("in", partitions=4, schema_type="string")
        admin.create("out", schema_type="string")
        values = [f"v{i}" for i in range(200)]
        _produce(store, values)
        log = tmp_path / "calls.jsonl"
        config = _config(log, parallelism=parallelism, max_records_per_batch=1000)
        with FunctionRun(config, store=store, spark=spark) as run:
            run.start(until_drained=True)
            assert run.wait(WAIT)
            with store.read() as conn:
                plan = subscription.read_plan(conn, config.subscription)
        outputs = _outputs(store)
        processed = [o.split(":", 1)[1] for o in outputs if not o.startswith("final:")]
        assert Counter(processed) == Counter(values)
        names = _check_sequences(log, graceful=True)
        finals = [o for o in outputs if o.startswith("final:")]
        assert {f.split(":")[2] for f in finals} == {
            obj for obj, ns in names.items() if "prepare_to_shutdown" in ns
        }
        # The last batch planned carried the end-of-stream markers ("__final__/<run>").
        assert plan is not None
        assert any(k.startswith(FINAL_KEY) for k in json.loads(plan.spark_end))
        if parallelism == 2:
            # One batch did both: one task per instance, whose object saw
            # its whole input, then its hook, once.
            assert sum(s.end - s.start for s in plan.spans) == len(values)
            assert sorted(f.split(":")[1] for f in finals) == ["0", "1"]
            for obj in (f.split(":")[2] for f in finals):
                calls = [c["call"] for c in _calls(log)[obj]]
                assert calls.count("process") > 0, (obj, calls)
        else:
            assert plan.spans == () or sum(s.end - s.start for s in plan.spans) == 0
            assert {f.split(":")[1] for f in finals} == {"0"}
    finally:
        store.close()
