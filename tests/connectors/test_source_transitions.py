"""A source's writers of state raise on a move the stored record refuses, never only log it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from connector_probes import WAIT_SECONDS, ScriptedSource
from sqlalchemy import update

from sparkfn.api.connector import END_OF_STREAM, Record
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.runner import SourceRunner
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.states import IllegalTransition
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin


def _config() -> SourceConfig:
    return SourceConfig(name="refused", classname="probes.Probe", output="out")


def test_a_source_group_raises_when_the_record_refuses_its_runners_move(store: Store) -> None:
    group = SourceInstances(_config(), store)
    group.supervised = True  # its supervisor records the run; the instances are the group's
    control.begin_run(store, group.control_id, "source", 1, "started")
    where = control.instance_runs.c.fqfn == group.control_id
    with store.write() as conn:  # never started: it cannot be stopping
        conn.execute(update(control.instance_runs).where(where).values(state="CREATED"))
    before = control.transitions_of(store, group.control_id)
    with pytest.raises(IllegalTransition, match="instance 0: CREATED -> STOPPING"):
        group._record(group.runners[0], "RUNNING", "STOPPING", "stop requested")
    assert control.transitions_of(store, group.control_id) == before


def test_the_runner_thread_raises_a_refused_move_once_closed_and_done(store: Store) -> None:
    TopicAdmin(store).create("out", partitions=1, schema_type="string")
    source = ScriptedSource([Record("a")], then=END_OF_STREAM)

    def refuse_the_end(old: str, new: str, cause: str) -> None:
        if new == "STOPPED":
            msg = f"refused: {old} -> {new}"
            raise IllegalTransition(msg)

    raised: list[BaseException | None] = []
    done = threading.Event()
    runner = SourceRunner(_config(), store, factory=lambda: source, on_transition=refuse_the_end)
    runner.on_done = done.set

    def record(args: Any) -> None:
        raised.append(args.exc_value)

    original, threading.excepthook = threading.excepthook, record
    try:
        runner.start()
        assert runner.join(WAIT_SECONDS)
    finally:
        threading.excepthook = original
    assert done.is_set() and runner.wait(0)  # whoever waits for it is told
    source.log.assert_closed_once_and_last()
    assert [type(e) for e in raised] == [IllegalTransition]
    assert "refused: STOPPING -> STOPPED" in str(raised[0])
