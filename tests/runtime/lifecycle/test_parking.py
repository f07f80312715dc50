"""Parking an idle query (``runtime/lifecycle/parking.py``).

A query whose input has been quiet is stopped with its run PARKED (its
instances still RUNNING), and started again, RUNNING, when input arrives. What must hold: nothing is lost or
repeated across park and wake-up (at-most-once included, whose cursors move
when a batch is planned); user objects are neither closed nor initialized
again by it; a drain of a parked run still runs its end-of-stream batch;
and a park never cuts a batch short: the reader, once the run is parked,
plans nothing, and parking is refused while a batch is planned or input is
pending. The first tests run the real query; the last ones drive the
group reader's planning calls directly against both stores.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from test_lifecycle import WAIT, _calls, _check_sequences, _config, _outputs, _produce

from sparkfn.api.lifecycle import RunState
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.group import members
from sparkfn.runtime.group.reader import GroupStreamReader
from sparkfn.runtime.group.solo import solo_group
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.parking import Parking
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.spark.planning import TopicRange

PARK_AFTER = 1.0


@pytest.fixture
def lstore(data_dir: Path) -> Any:
    store = Store.open(None, data_dir)
    TopicAdmin(store).create("in", partitions=4, schema_type="string")
    TopicAdmin(store).create("out", schema_type="string")
    yield store
    store.close()


def _processed(store: Store, expected: int) -> bool:
    return len([o for o in _outputs(store) if not o.startswith("final:")]) >= expected


def _supervised_state(run: FunctionRun) -> RunState:
    assert run.supervisor is not None
    return run.supervisor.state


def _parked(run: FunctionRun) -> bool:
    assert run.supervisor is not None
    return run.supervisor.query_target.parked


@pytest.mark.slow
@pytest.mark.parametrize("guarantee", ["effectively_once", "at_most_once"])
def test_a_quiet_query_parks_and_wakes_on_input_losing_and_repeating_nothing(
    spark: Any, lstore: Store, tmp_path: Path, guarantee: str
) -> None:
    log = tmp_path / "calls.jsonl"
    config = _config(log, parallelism=2, processing_guarantees=guarantee)
    run = FunctionRun(config, store=lstore, spark=spark, park_idle_after=PARK_AFTER).start()
    values: list[str] = []
    for round_ in range(2):
        batch = [f"r{round_}-{i}" for i in range(60)]
        values += batch
        _produce(lstore, batch)
        total = len(values)
        run.wait_for(lambda total=total: _processed(lstore, total), WAIT, f"{total} outputs")
        run.wait_for(lambda: _parked(run), WAIT, "the query parked")
        query = run.query
        assert query is not None and not query.isActive, "a parked query is stopped in Spark"
        assert run.run_state == "PARKED", "a parked run goes on"
        # The supervisor's own state is the record's: one machine.
        run.wait_for(lambda: _supervised_state(run) is RunState.PARKED, WAIT, "it PARKED too")
        assert [i.status.state for i in run.status().instances] == ["RUNNING", "RUNNING"]
    # Parking closed nothing and initialized nothing twice: the objects
    # created before the first park still process after it.
    before_drain = {obj: [c["call"] for c in calls] for obj, calls in _calls(log).items()}
    assert all(names.count("close") == 0 for names in before_drain.values()), before_drain
    # A drain of a parked run starts its query for the end-of-stream batch.
    assert run.drain(WAIT)
    assert run.run_state == "STOPPED"
    assert run.supervisor is not None and run.supervisor.state is RunState.STOPPED
    outputs = _outputs(lstore)
    processed = [o.split(":", 1)[1] for o in outputs if not o.startswith("final:")]
    assert Counter(processed) == Counter(values)
    _check_sequences(log, graceful=True)
    assert {o.split(":")[1] for o in outputs if o.startswith("final:")} == {"0", "1"}


@pytest.mark.slow
def test_a_suspend_of_a_parked_run_resumes_where_it_stopped(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    config = _config(log, processing_guarantees="effectively_once")
    checkpoint = tmp_path / "checkpoint"
    run = FunctionRun(config, store=lstore, spark=spark, park_idle_after=PARK_AFTER)
    run.start(checkpoint=checkpoint)
    _produce(lstore, ["a", "b", "c"])
    run.wait_for(lambda: _processed(lstore, 3), WAIT, "3 outputs")
    run.wait_for(lambda: _parked(run), WAIT, "the query parked")
    assert run.suspend(WAIT)
    assert run.run_state == "SUSPENDED"
    _check_sequences(log, graceful=True)
    _produce(lstore, ["d", "e"])
    again = FunctionRun(config, store=lstore, spark=spark).start(
        until_drained=True, checkpoint=checkpoint
    )
    assert again.wait(WAIT)
    processed = [o.split(":", 1)[1] for o in _outputs(lstore) if not o.startswith("final:")]
    assert Counter(processed) == Counter("abcde")


# --- parking and planning, driven directly ----------------------------------------------


def _reader(store: Store, config: FunctionConfig, *, slots: int = 2) -> GroupStreamReader:
    """The reader of ``config``'s group of one, in its run's epoch, driven directly."""
    cid = config.fqfn
    record = control.read_control(store, cid)
    assert record is not None
    members.join(store, solo_group(cid), cid, config, epoch=record.epoch, version="1")
    return GroupStreamReader(
        {
            "storeurl": store.url,
            "datadir": str(store.data_dir),
            "group": solo_group(cid),
            "taskslots": str(slots),
            "parking": "true",  # as the start of a group of one says
        }
    )


def _rows(tasks: list[Any]) -> int:
    """The data rows the tasks of a group's batch read."""
    return sum(
        p.end - p.start
        for t in tasks
        for s in t.slices
        for p in s.parts
        if isinstance(p, TopicRange)
    )


def _cursors(store: Store, sub: str) -> dict[tuple[int, int], int]:
    with store.read() as conn:
        return subscription.cursors(conn, sub)


def test_parking_waits_for_planned_batches_and_a_parked_run_plans_nothing(store: Store) -> None:
    TopicAdmin(store).create("in", partitions=2, schema_type="string")
    config = _config(
        store.data_dir / "calls.jsonl",
        processing_guarantees="at_most_once",  # a plan moves the cursors at once
        max_records_per_batch=None,
    )
    control_id, sub = config.fqfn, config.subscription
    control.begin_run(store, control_id, "function", 1, "test")
    control.set_state(store, control_id, control.RUNNING, "started")  # as its supervisor does
    parking = Parking(
        store, control_id=control_id, subscription_name=sub, inputs=lambda: ["in"], after=0.0
    )
    reader = _reader(store, config)
    start = reader.initialOffset()
    parking.started()
    assert parking.park(lambda: None), "nothing pending, nothing planned: it parks"
    parking.started()  # clears the flag, as a start again does

    _produce(store, [f"m{i}" for i in range(10)])
    assert not parking.park(lambda: None), "input is pending: no park"
    end = reader.latestOffset(start, None)
    assert end != start
    reader.partitions(start, end)  # planned (and, at-most-once, acked): a batch in flight
    assert sum(_cursors(store, sub).values()) == 10
    assert not parking.park(lambda: None), "a batch is planned and not committed: no park"
    with store.write() as conn:
        subscription.commit_plan(conn, sub, 1, owner=control_id)
    assert parking.park(lambda: None)
    record = control.read_control(store, control_id)
    assert record is not None and record.state == "PARKED" and record.stop_mode is None
    moves = [(m["from"], m["to"]) for m in control.transitions_of(store, control_id)]
    assert moves[-3:] == [("RUNNING", "PARKED"), ("PARKED", "RUNNING"), ("RUNNING", "PARKED")]

    # Parked: the reader admits nothing new...
    _produce(store, [f"n{i}" for i in range(5)])
    assert reader.latestOffset(end, None) == end
    parking.started()
    later = reader.latestOffset(end, None)
    assert later != end
    # ...and a batch whose latestOffset saw data before the park plans
    # nothing once it is parked: its cursors stay (nothing acked, nothing lost).
    with store.write() as conn:
        conn.execute(
            update(control.runs).where(control.runs.c.fqfn == control_id).values(state="PARKED")
        )
    assert reader.partitions(end, later) == []
    assert sum(_cursors(store, sub).values()) == 10
    with store.write() as conn:
        conn.execute(
            update(control.runs).where(control.runs.c.fqfn == control_id).values(state="RUNNING")
        )
    # Started again, the next batch reads what that one skipped, from the cursors.
    following = reader.latestOffset(later, None)
    assert _rows(reader.partitions(later, following)) == 5
    assert sum(_cursors(store, sub).values()) == 15
