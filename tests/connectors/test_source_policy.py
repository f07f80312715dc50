"""Sources obey their failure policy (DESIGN.md 2.3: connector exceptions are fatal).

Real source runners on their threads, the one supervisor, both store
backends: a source whose ``read()`` raises is a fatal death in the lifecycle
record; ``on_fatal`` decides what follows, as for a function.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from connector_probes import WAIT_SECONDS, CallLog, wait_until

from sparkfn.api.connector import END_OF_STREAM, Record, Source, SourceContext
from sparkfn.api.lifecycle import RunState
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.source_run import SourceRun
from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer


class Counting(Source):
    """Reads ``"<instance>-<n>"``; raises in ``read()`` after ``fail_after`` records
    while ``failures[instance]`` is positive (each failure uses one up)."""

    def __init__(self, instance: int, failures: dict[int, int], fail_after: int = 3) -> None:
        self.instance = instance
        self.failures = failures
        self.fail_after = fail_after
        self.count = 0
        self.log = CallLog()
        self.lock = threading.Lock()

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        with self.log.call("open"):
            pass

    def read(self) -> Any:
        with self.log.call("read"):
            with self.lock:
                if self.count >= self.fail_after and self.failures.get(self.instance, 0) > 0:
                    self.failures[self.instance] -= 1
                    raise ValueError(f"instance {self.instance} cannot read")
            self.count += 1
            return Record(f"{self.instance}-{self.count}")

    def close(self) -> None:
        with self.log.call("close"):
            pass


def _setup(store: Store, **policy: Any) -> tuple[SourceConfig, list[Counting], Any]:
    TopicAdmin(store).create("out", schema_type="string")
    config = SourceConfig(
        name="counter",
        classname="probes.Counter",
        output="out",
        parallelism=2,
        poll_interval=0.01,
        batch_timeout=0.01,
        failure_policy={"backoff_initial": 0.1, "close_timeout": 10, **policy},
    )
    made: list[Counting] = []
    failures = {1: 1}  # instance 1 fails once

    def factory(instance: int) -> Source:
        source = Counting(instance, failures)
        made.append(source)
        return source

    return config, made, factory


def _from(store: Store, instance: int) -> int:
    messages = Consumer(store, "out", initial_position="earliest").receive(max_messages=100_000)
    return sum(1 for m in messages if (m.value or b"").decode().startswith(f"{instance}-"))


def _record(store: Store) -> control.RunControl:
    record = control.read_control(store, control.control_id("source", "public/default/counter"))
    assert record is not None
    return record


def test_a_source_that_raises_is_a_fatal_death_and_shuts_the_source_down(store: Store) -> None:
    config, made, factory = _setup(store)
    run = SourceRun(config, store, factory=factory).start()
    assert run.wait(WAIT_SECONDS), run.transitions()
    assert run.join(WAIT_SECONDS)

    record = _record(store)
    assert record.state == RunState.ERROR
    dead = record.instances[1]
    assert dead.fatal and dead.fatal_exceptions == 1
    assert dead.death is not None and dead.death.origin == "connector"
    assert str(dead.death) == "ValueError: instance 1 cannot read"
    # SHUTDOWN_FUNCTION (the default for fatal errors) cancels the other instance.
    assert record.instances[0].state == RunState.STOPPED
    assert run.death() is not None and run.death()[0] == 1  # type: ignore[index]
    assert len(made) == 2  # no restart
    for source in made:
        source.log.assert_closed_once_and_last()


def test_a_group_alone_records_the_sources_exception_as_fatal(store: Store) -> None:
    config, made, factory = _setup(store)
    group = SourceInstances(config, store, factory=factory)
    group.start()
    assert group.runners[1].wait(WAIT_SECONDS)
    wait_until(lambda: _record(store).instances[1].dead, "the death in the lifecycle record")
    dead = _record(store).instances[1]
    assert dead.fatal and dead.fatal_exceptions == 1
    group.stop("cancel")
    assert group.wait(WAIT_SECONDS) and group.join(WAIT_SECONDS)


def test_replace_instance_restarts_the_dead_instance_and_it_keeps_producing(
    store: Store,
) -> None:
    config, made, factory = _setup(store, on_fatal="REPLACE_INSTANCE")
    run = SourceRun(config, store, factory=factory).start()
    try:
        wait_until(lambda: len(made) == 3, "a new source object for instance 1")
        # The replacement reads on from its own start: more than the 3 before the death.
        wait_until(lambda: _from(store, 1) >= 10, "records of the replaced instance 1")
        record = _record(store)
        assert record.state == RunState.RUNNING
        assert record.instances[1].restarts == 1
        assert record.instances[1].fatal_exceptions == 1
        assert record.instances[1].state == RunState.RUNNING
        assert record.instances[0].restarts == 0
        assert record.epoch == 2  # the replacement runs in a new epoch
        assert not run.wait(0)
    finally:
        run.stop("drain")
    assert run.wait(WAIT_SECONDS) and run.join(WAIT_SECONDS)
    assert _record(store).state == RunState.STOPPED
    assert [m.count("open") for m in (s.log for s in made)] == [1, 1, 1]
    for source in made:
        source.log.assert_closed_once_and_last()
    moves = [(t["instance"], t["to"]) for t in run.transitions()]
    assert (None, "RESTARTING") in moves and (1, "RESTARTING") in moves


def test_shutdown_instance_leaves_the_others_running(store: Store) -> None:
    config, made, factory = _setup(store, on_fatal="SHUTDOWN_INSTANCE")
    run = SourceRun(config, store, factory=factory).start()
    try:
        wait_until(lambda: _record(store).instances[1].handled, "the death handled")
        before = _from(store, 0)
        wait_until(lambda: _from(store, 0) > before + 5, "instance 0 appending on")
        record = _record(store)
        assert record.state == RunState.RUNNING
        assert record.instances[1].state == RunState.ERROR
        assert record.instances[0].state == RunState.RUNNING
        assert run.runners[0].state is RunState.RUNNING
        assert len(made) == 2  # not replaced
    finally:
        run.stop("drain")
    assert run.wait(WAIT_SECONDS) and run.join(WAIT_SECONDS)
    record = _record(store)
    assert record.state == RunState.STOPPED
    assert {i: r.state for i, r in record.instances.items()} == {
        0: RunState.STOPPED,
        1: RunState.ERROR,
    }
    for source in made:
        source.log.assert_closed_once_and_last()


class Bounded(Source):
    """Three records, then the end of its input."""

    def __init__(self) -> None:
        self.left = 3

    def read(self) -> Any:
        if not self.left:
            return END_OF_STREAM
        self.left -= 1
        return Record(f"r{self.left}")


def test_a_source_whose_input_ends_is_recorded_stopped_at_once(store: Store) -> None:
    # A runner records its final state a moment before its thread is done:
    # a supervisor woken by that record found the run not finished yet and
    # waited for its next recheck (a minute with the shared watch) before it
    # recorded the drain. The runner's end now wakes the supervisor itself.
    TopicAdmin(store).create("out", schema_type="string")
    for attempt in range(5):
        config = SourceConfig(
            name=f"bounded-{attempt}", classname="probes.Bounded", output="out", parallelism=2,
            poll_interval=0.01, batch_timeout=0.01,
        )  # fmt: skip
        run = SourceRun(config, store, factory=lambda _: Bounded()).start()
        assert run.wait(8), f"attempt {attempt}: not ended in 8 s: {run.transitions()}"
        assert run.state == RunState.STOPPED
