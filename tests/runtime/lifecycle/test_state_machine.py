"""One state machine, enforced: every (state, move) pair against its table, in
:func:`~sparkfn.runtime.lifecycle.states.transition` and in the stored record,
and an illegal move raises from every writer of a run's or an instance's state.

The source runner's writers, and the supervisor's thread meeting a refused move,
are in ``tests/connectors/test_source_transitions.py``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Connection, update

from sparkfn.api.lifecycle import DeathCause, RunState
from sparkfn.config.connector import SourceConfig
from sparkfn.config.policy import FailurePolicy
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.runner import SourceRunner
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.moves import Moves
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


# --- every writer raises on an illegal move, and nothing is written ------------------------

_run_id = control.FUNCTION


def _begun(store: Store, name: str) -> str:
    fqfn = f"public/default/{name}-{store.dialect}"
    control.begin_run(store, fqfn, "function", 1, "started")
    return fqfn


Write = Callable[[Store, str], object]
WRITERS: dict[str, tuple[int, RunState, Write, str]] = {
    # writer: (record moved, the state it is put in, the write, the refused move)
    "set_state": (_run_id, RunState.STOPPED, lambda s, f: control.set_state(s, f, "RUNNING", "x"), "STOPPED -> RUNNING"),
    "request_stop": (_run_id, RunState.SUSPENDED, lambda s, f: control.request_stop(s, f, "drain"), "SUSPENDED -> STOPPING"),
    "record_death": (0, RunState.CREATED, lambda s, f: control.record_death(s, f, 0, DeathCause("E", "boom"), fatal=True, epoch=1), "CREATED -> ERROR"),
    "revive": (0, RunState.STOPPING, lambda s, f: control.revive(s, f, [0], "again", 1), "STOPPING -> RUNNING"),
    "move_run": (_run_id, RunState.STOPPED, lambda s, f: _in_one(s, lambda c: control.move_run(c, f, "PARKED", "quiet", only_from=frozenset({"STOPPED"}))), "STOPPED -> PARKED"),
}  # fmt: skip


def _in_one(store: Store, write: Callable[[Connection], object]) -> None:
    with store.write() as conn:
        write(conn)


@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_of_the_stored_record_raises_on_an_illegal_move(
    store: Store, writer: str
) -> None:
    instance_id, state, write, refused = WRITERS[writer]
    fqfn = _begun(store, f"writer-{writer}")
    _put(store, fqfn, instance_id, state)
    before = control.read_control(store, fqfn)
    moves = control.transitions_of(store, fqfn)
    with pytest.raises(IllegalTransition, match=refused):
        write(store, fqfn)
    assert control.read_control(store, fqfn) == before  # the whole write rolled back
    assert control.transitions_of(store, fqfn) == moves


@pytest.mark.parametrize("writer", ["set_state", "request_stop", "revive", "move_run"])
def test_every_writer_refuses_a_record_that_is_not_there(store: Store, writer: str) -> None:
    _, _, write, _ = WRITERS[writer]
    fqfn = f"public/default/never-{writer}-{store.dialect}"
    with pytest.raises(IllegalTransition, match="no record to move"):
        write(store, fqfn)
    assert control.read_control(store, fqfn) is None


def test_a_users_start_moves_from_every_state_and_records_it(store: Store) -> None:
    # begin_run's tables (START_TRANSITIONS, RETIRE) allow every move by design: a
    # start supersedes whatever its record says. What it must do is record them.
    fqfn = _begun(store, "starts")
    control.begin_run(store, fqfn, "function", 2, "wider")
    for old in RunState:
        if old is RunState.STARTING:
            continue
        _put(store, fqfn, control.FUNCTION, old)
        _put(store, fqfn, 1, old if old is not RunState.PARKED else RunState.RUNNING)
        before = len(control.transitions_of(store, fqfn))
        control.begin_run(store, fqfn, "function", 1, f"from {old}")
        new = control.transitions_of(store, fqfn)[before:]
        assert (None, old.value, "STARTING") in [(m["instance"], m["from"], m["to"]) for m in new]
        retired = [m for m in new if m["instance"] == 1]
        ended_already = old is RunState.STOPPED
        assert [m["to"] for m in retired] == ([] if ended_already else ["STOPPED"]), (old, new)
        _put(store, fqfn, 1, RunState.RUNNING)
        control.begin_run(store, fqfn, "function", 2, "wider")


def test_the_runner_threads_own_machine_refuses_an_illegal_move(store: Store) -> None:
    config = SourceConfig(name="runner-machine", classname="probes.Probe", output="out")
    runner = SourceRunner(config, store)
    with pytest.raises(IllegalTransition, match="CREATED -> RUNNING"):
        runner._set_state(RunState.RUNNING, "never started")
    assert runner.state is RunState.CREATED


# --- a race is an outcome: set_state says what it left as it was ---------------------------


def test_set_state_returns_the_records_its_race_rule_kept(store: Store) -> None:
    fqfn = f"public/default/kept-{store.dialect}"
    control.begin_run(store, fqfn, "function", 3, "started")
    control.set_state(store, fqfn, control.RUNNING, "up", [control.FUNCTION, 0, 1, 2])
    control.set_state(store, fqfn, control.STOPPED, "alone", [1])
    control.set_state(store, fqfn, control.ERROR, "died", [2])

    moves = control.set_state(store, fqfn, control.STOPPING, "late", [0, 1, 2], keep_ended=True)
    assert moves == Moves((0,), {1: "STOPPED", 2: "ERROR"})

    ended = control.set_state(store, fqfn, control.STOPPED, "end", [0, 1, 2], keep_other_ends=True)
    assert ended == Moves((0, 1), {2: "ERROR"})  # one already STOPPED takes the cause

    _put(store, fqfn, 0, RunState.RESTARTING)  # replaced after a death, say
    opened = frozenset({"CREATED", "STARTING", "RESTARTING"})
    assert control.set_state(store, fqfn, control.RUNNING, "opened", [0, 1], only_from=opened) == (
        Moves((0,), {1: "STOPPED"})
    )
    record = control.read_control(store, fqfn)
    assert record is not None
    assert {i: r.state for i, r in record.instances.items()} == {
        0: "RUNNING",
        1: "STOPPED",
        2: "ERROR",
    }


def test_the_runs_own_record_is_never_kept_by_a_race_rule(store: Store) -> None:
    fqfn = f"public/default/strict-{store.dialect}"
    control.begin_run(store, fqfn, "function", 1, "started")
    control.set_state(store, fqfn, control.RUNNING, "up", [control.FUNCTION, 0])
    control.set_state(store, fqfn, control.STOPPING, "stop")
    control.set_state(store, fqfn, control.STOPPED, "stopped")
    with pytest.raises(IllegalTransition, match="STOPPED -> STOPPING"):
        control.set_state(store, fqfn, control.STOPPING, "late", keep_ended=True)
    with pytest.raises(IllegalTransition, match="STOPPED -> RUNNING"):
        control.set_state(store, fqfn, control.RUNNING, "late", only_from=frozenset({"CREATED"}))


def test_the_table_in_docs_lifecycle_is_the_one_in_the_code() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "lifecycle.md").read_text()
    section = text[text.index("## States and transitions") :]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows, "the state machine table"
    shown_run: dict[RunState, set[RunState]] = {}
    shown_instance: dict[RunState, set[RunState]] = {}
    for row in rows:
        origin, run, instance = (cell.strip() for cell in row.strip("|").split("|"))
        states = {RunState(s) for s in re.findall(r"`([A-Z]+)`", origin)}
        run_moves = {RunState(s) for s in re.findall(r"`([A-Z]+)`", run)}
        instance_moves = (
            run_moves
            if instance == "the same"
            else {RunState(s) for s in re.findall(r"`([A-Z]+)`", instance)}
        )
        for state in states:
            shown_run[state] = run_moves
            if instance_moves:
                shown_instance[state] = instance_moves
    assert shown_run == {s: set(m) for s, m in RUN_TRANSITIONS.items()}
    assert shown_instance == {s: set(m) for s, m in INSTANCE_TRANSITIONS.items()}
