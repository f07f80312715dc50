"""One state machine, enforced: every (state, move) pair against its table, in
:func:`~sparkfn.runtime.lifecycle.states.transition` and in the stored record,
and an illegal move raises from every writer of a run's or an instance's state.

The source runner's writers are in ``tests/connectors/test_source_transitions.py``.
"""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import update

from sparkfn.api.lifecycle import RunState
from sparkfn.config.connector import SourceConfig
from sparkfn.config.policy import FailurePolicy
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.records import row_of
from sparkfn.runtime.lifecycle.states import (
    INSTANCE_TRANSITIONS,
    RETIRE,
    RUN_TRANSITIONS,
    RUNNER_TRANSITIONS,
    START_TRANSITIONS,
    IllegalTransition,
    Table,
    transition,
)
from sparkfn.runtime.lifecycle.supervisor import Supervisor
from sparkfn.store.store import Store

TABLES: dict[str, Table] = {
    "run": RUN_TRANSITIONS,
    "instance": INSTANCE_TRANSITIONS,
    "start": START_TRANSITIONS,
    "retire": RETIRE,
    "runner": RUNNER_TRANSITIONS,
}
PAIRS = list(itertools.product(RunState, RunState))


def _legal(table: Table, old: RunState, new: RunState) -> bool:
    return old == new or new in table.get(old, frozenset())


@pytest.mark.parametrize("name", TABLES)
def test_transition_allows_exactly_the_moves_of_its_table(name: str) -> None:
    table = TABLES[name]
    for old, new in PAIRS:
        if _legal(table, old, new):
            assert transition(old.value, new.value, table, "f") is new
        else:
            with pytest.raises(IllegalTransition, match=f"f: {old} -> {new} is not a legal move"):
                transition(old, new, table, "f")


def _put(store: Store, fqfn: str, instance_id: int, state: RunState) -> None:
    """Set a record's state as a test's starting point (not a move)."""
    table, where = row_of(fqfn, instance_id)
    with store.write() as conn:
        conn.execute(update(table).where(where).values(state=state.value))


@pytest.mark.parametrize("instance_id", [control.FUNCTION, 0], ids=["run", "instance"])
def test_the_stored_record_makes_and_records_every_legal_move_and_refuses_the_rest(
    store: Store, instance_id: int
) -> None:
    fqfn = f"public/default/pairs-{instance_id}-{store.dialect}"
    control.begin_run(store, fqfn, "function", 1, "started")
    table = RUN_TRANSITIONS if instance_id == control.FUNCTION else INSTANCE_TRANSITIONS
    for old, new in PAIRS:
        _put(store, fqfn, instance_id, old)
        before = control.transitions_of(store, fqfn)
        if _legal(table, old, new):
            control.set_state(store, fqfn, new, f"{old} to {new}", [instance_id])
            recorded = control.transitions_of(store, fqfn)[len(before) :]
            moves = [(m["from"], m["to"], m["cause"]) for m in recorded]
            assert moves == ([] if old == new else [(old, new, f"{old} to {new}")])
        else:
            with pytest.raises(IllegalTransition, match=f"{old} -> {new}"):
                control.set_state(store, fqfn, new, "refused", [instance_id])
            assert control.transitions_of(store, fqfn) == before
        record = control.read_control(store, fqfn)
        assert record is not None
        now = record.state if instance_id == control.FUNCTION else record.instances[0].state
        assert now == (new if _legal(table, old, new) else old), (old, new)


def test_a_move_of_a_record_that_is_not_there_raises(store: Store) -> None:
    fqfn = f"public/default/nowhere-{store.dialect}"
    with pytest.raises(IllegalTransition, match=f"{fqfn}: no record to move to RUNNING"):
        control.set_state(store, fqfn, control.RUNNING, "started")
    control.begin_run(store, fqfn, "function", 1, "started")
    with pytest.raises(IllegalTransition, match=f"{fqfn} instance 3: no record to move"):
        control.set_state(store, fqfn, control.RUNNING, "started", [3])


def test_a_start_with_fewer_instances_ends_the_others_by_recorded_moves(store: Store) -> None:
    fqfn = f"public/default/shrink-{store.dialect}"
    control.begin_run(store, fqfn, "function", 3, "started")
    control.set_state(store, fqfn, control.RUNNING, "up", [control.FUNCTION, 0, 1, 2])
    control.set_state(store, fqfn, control.ERROR, "died", [2])
    control.begin_run(store, fqfn, "function", 1, "restarted")
    ended = [
        (m["instance"], m["from"], m["to"])
        for m in control.transitions_of(store, fqfn)
        if m["to"] == "STOPPED"
    ]
    assert sorted(ended) == [(1, "RUNNING", "STOPPED"), (2, "ERROR", "STOPPED")]
    record = control.read_control(store, fqfn)
    assert record is not None
    assert {i: r.state for i, r in record.instances.items()} == {
        0: "STARTING",
        1: "STOPPED",
        2: "STOPPED",
    }


def test_the_supervisor_raises_on_an_illegal_move_of_its_run(store: Store) -> None:
    config = SourceConfig(name="machine", classname="probes.Probe", output="out")
    target = SourceInstances(config, store)
    supervisor = Supervisor(
        store, target, FailurePolicy(), control_id=control.control_id("source", config.fqn)
    )
    with pytest.raises(IllegalTransition, match="CREATED -> RUNNING"):
        supervisor._move(RunState.RUNNING)
    assert supervisor.state is RunState.CREATED


def test_parking_is_a_recorded_move_of_the_run_and_refuses_an_illegal_one(store: Store) -> None:
    fqfn = f"public/default/parks-{store.dialect}"
    control.begin_run(store, fqfn, "function", 1, "started")
    control.set_state(store, fqfn, control.RUNNING, "started", [control.FUNCTION, 0])
    running, parked = frozenset({control.RUNNING}), frozenset({control.PARKED})
    with store.write() as conn:
        assert control.move_run(conn, fqfn, control.PARKED, "quiet", only_from=running)
    with store.write() as conn:
        assert control.move_run(conn, fqfn, control.RUNNING, "input arrived", only_from=parked)
    control.request_stop(store, fqfn, "drain")
    with store.write() as conn:  # a stop wins: nothing moves
        assert not control.move_run(conn, fqfn, control.PARKED, "quiet", only_from=running)
    control.set_state(store, fqfn, control.STOPPED, "drained")
    control.clear_stop(store, fqfn)
    with store.write() as conn, pytest.raises(IllegalTransition, match="STOPPED -> PARKED"):
        control.move_run(conn, fqfn, control.PARKED, "quiet", only_from=frozenset({"STOPPED"}))
    moves = [(m["from"], m["to"], m["cause"]) for m in control.transitions_of(store, fqfn)]
    assert moves[-4:] == [
        ("RUNNING", "PARKED", "quiet"),
        ("PARKED", "RUNNING", "input arrived"),
        ("RUNNING", "STOPPING", "drain requested"),
        ("STOPPING", "STOPPED", "drained"),
    ]
    record = control.read_control(store, fqfn)
    assert record is not None and record.state == control.STOPPED
    assert record.instances[0].state == control.RUNNING  # parking moves the run only
