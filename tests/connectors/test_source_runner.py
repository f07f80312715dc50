"""The source runner's lifecycle on a real store: close() exactly once and last, stop
modes, fatal errors from any thread, guarantees and batching.

Sources here are instrumented (connector_probes): every call is numbered on
entry and exit from one counter, so the tests assert the order of calls.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from connector_probes import (
    WAIT_SECONDS,
    ScriptedSource,
    ThreadedPushSource,
    finish,
    records,
    wait_until,
)

from sparkfn.api.connector import END_OF_STREAM, Record, Source
from sparkfn.api.errors import FatalError
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer

GRACEFUL = {"prepare_to_shutdown", "shutdown"}


def _config(**fields: Any) -> SourceConfig:
    base: dict[str, Any] = {"name": "probe", "classname": "probes.Probe", "output": "out"}
    base.update(fields)
    return SourceConfig(**base)


def _runner(
    store: Store,
    source: Source,
    transitions: list[tuple[str, str, str]] | None = None,
    **fields: Any,
) -> SourceRunner:
    hook = None if transitions is None else (lambda *t: transitions.append(t))
    return SourceRunner(_config(**fields), store, factory=lambda: source, on_transition=hook)


def _topic(
    store: Store, name: str = "out", partitions: int = 1, schema_type: str = "string"
) -> None:
    TopicAdmin(store).create(name, partitions=partitions, schema_type=schema_type)


def _values(store: Store, topic: str = "out") -> list[str]:
    messages = Consumer(store, topic, initial_position="earliest").receive(max_messages=100_000)
    return [m.value.decode() for m in messages if m.value is not None]


def _concurrently(*actions: Any) -> None:
    """Run the actions on threads released together by a barrier; join them all."""
    barrier = threading.Barrier(len(actions))
    errors: list[BaseException] = []

    def run(action: Any) -> None:
        barrier.wait(WAIT_SECONDS)
        try:
            action()
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(a,), name=f"stopper-{i}") for i, a in enumerate(actions)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)
        assert not thread.is_alive()
    assert not errors, errors


# --- exactly one close, last ---------------------------------------------------------


@pytest.mark.parametrize(
    ("second", "appended"), [("drain", ["a", "b", "late"]), ("cancel", [])], ids=["drain", "cancel"]
)
def test_stops_racing_a_blocked_read_get_exactly_one_close_after_it_returns(
    store: Store, second: str, appended: list[str]
) -> None:
    _topic(store)
    in_read = threading.Event()
    release = threading.Event()

    def block_second_read(source: ScriptedSource) -> None:
        if source.log.count("read") >= 1:  # this is the second read
            in_read.set()
            assert release.wait(WAIT_SECONDS)

    source = ScriptedSource([records("a", "b")], then=Record("late"), on_read=block_second_read)
    runner = _runner(store, source, batch_timeout=60)
    runner.start()
    try:
        assert in_read.wait(WAIT_SECONDS)
        _concurrently(lambda: runner.stop("drain"), lambda: runner.stop(second))
        # Both requests are in; the read still runs, so nothing else may happen yet.
        time.sleep(0.1)
        assert runner.state is SourceState.STOPPING
        assert runner.in_call == "read"
        assert source.log.count("close") == 0
    finally:
        release.set()
    finish(runner)
    _concurrently(lambda: runner.stop("cancel"), lambda: runner.stop("drain"))  # after the end

    source.log.assert_closed_once_and_last()
    assert {c.thread for c in source.log.calls} == {runner.name}
    assert runner.state is SourceState.STOPPED
    assert runner.death is None
    assert _values(store) == appended
    names = source.log.names()
    if second == "drain":
        assert names[-3:] == ["prepare_to_shutdown", "shutdown", "close"]
    else:
        assert not GRACEFUL & set(names)
        assert "ack" not in names  # abandoned, never appended


def test_stops_and_a_fatal_racing_a_slow_commit_get_exactly_one_close_after_it(
    store: Store,
) -> None:
    _topic(store)
    in_commit = threading.Event()
    release = threading.Event()

    def slow_commit(source: ScriptedSource) -> None:
        in_commit.set()
        assert release.wait(WAIT_SECONDS)

    source = ScriptedSource([Record("x")], then=None, on_commit=slow_commit)
    runner = _runner(store, source)
    runner.start()
    try:
        assert in_commit.wait(WAIT_SECONDS)
        _concurrently(
            lambda: runner.stop("drain"),
            lambda: runner.stop("suspend"),
            lambda: runner.stop("cancel"),
            lambda: runner.fatal(RuntimeError("operator pulled the plug")),
        )
        time.sleep(0.1)
        assert runner.in_call == "commit"
        assert source.log.count("close") == 0
    finally:
        release.set()
    finish(runner)
    runner.stop("drain")

    source.log.assert_closed_once_and_last()
    assert runner.state is SourceState.ERROR
    assert runner.death is not None and runner.death.type == "RuntimeError"
    assert runner.death.thread.startswith("stopper-")
    assert not GRACEFUL & set(source.log.names())
    assert _values(store) == ["x"]  # it was appended before the requests


# --- failures --------------------------------------------------------------------------


def test_a_read_that_raises_kills_the_instance_and_still_closes_it_once(
    sqlite_store: Store,
) -> None:
    _topic(sqlite_store)
    transitions: list[tuple[str, str, str]] = []
    source = ScriptedSource(fail_in="read")
    runner = _runner(sqlite_store, source, transitions)
    runner.start()
    finish(runner)

    assert runner.state is SourceState.ERROR
    death = runner.death
    assert death is not None
    assert (death.type, death.message, death.origin) == ("ValueError", "boom in read", "connector")
    assert death.thread == runner.name == "source-public/default/probe-0"
    assert "boom in read" in death.traceback and "Traceback" in death.traceback
    assert source.log.names() == ["open", "read", "close"]
    source.log.assert_closed_once_and_last()
    assert runner.stats.errors == 1
    assert [(old, new) for old, new, _ in transitions] == [
        ("CREATED", "STARTING"),
        ("STARTING", "RUNNING"),
        ("RUNNING", "STOPPING"),
        ("STOPPING", "ERROR"),
    ]
    assert "ValueError: boom in read" in transitions[-1][2]


@pytest.mark.parametrize("method", ["open", "ack", "commit", "prepare_to_shutdown", "shutdown"])
def test_any_source_method_that_raises_is_fatal(sqlite_store: Store, method: str) -> None:
    _topic(sqlite_store)
    source = ScriptedSource([Record("a")], then=END_OF_STREAM, fail_in=method)
    runner = _runner(sqlite_store, source)
    runner.start()
    finish(runner)

    assert runner.state is SourceState.ERROR
    assert runner.death is not None and runner.death.message == f"boom in {method}"
    source.log.assert_closed_once_and_last()
    names = source.log.names()
    assert names[-1] == "close" and names[-2] == method
    if method == "prepare_to_shutdown":
        assert "shutdown" not in names  # no graceful call after a death


def test_a_close_that_raises_is_the_death_after_a_clean_end(sqlite_store: Store) -> None:
    _topic(sqlite_store)
    source = ScriptedSource([Record("a")], then=END_OF_STREAM, fail_in="close")
    runner = _runner(sqlite_store, source)
    runner.start()
    finish(runner)

    assert runner.state is SourceState.ERROR
    assert runner.death is not None and runner.death.message == "boom in close"
    assert source.log.names()[-3:] == ["prepare_to_shutdown", "shutdown", "close"]
    assert _values(sqlite_store) == ["a"]


def test_notify_error_from_a_push_sources_own_thread_terminates_it_promptly(
    sqlite_store: Store,
) -> None:
    _topic(sqlite_store)
    source = ThreadedPushSource(count=5, fail_after=True)
    runner = _runner(sqlite_store, source, batch_timeout=60)  # a long batch wait must not delay it
    started = time.monotonic()
    runner.start()
    finish(runner, timeout=5)

    assert time.monotonic() - started < 3
    assert runner.state is SourceState.ERROR
    death = runner.death
    assert death is not None
    assert (death.type, death.message) == ("ConnectionError", "upstream went away")
    assert (death.origin, death.thread) == ("fatal", "push-reader")
    source.log.assert_closed_once_and_last()
    assert not GRACEFUL & set(source.log.names())
    assert source.thread is not None and not source.thread.is_alive()


def test_fatal_from_a_user_thread_stops_the_instance_without_waiting_for_the_poll(
    sqlite_store: Store,
) -> None:
    _topic(sqlite_store)
    source = ScriptedSource(then=None)
    runner = _runner(sqlite_store, source, poll_interval=60)  # read() found nothing: a long sleep
    runner.start()
    wait_until(lambda: source.log.count("read") >= 1, "the first read")
    context = source.context
    assert context is not None

    started = time.monotonic()
    user = threading.Thread(
        target=context.fatal, args=(RuntimeError("lost the lease"),), name="user-thread"
    )
    user.start()
    user.join(WAIT_SECONDS)
    finish(runner, timeout=5)

    assert time.monotonic() - started < 1.5
    death = runner.death
    assert death is not None
    assert (death.type, death.message, death.origin, death.thread) == (
        "RuntimeError",
        "lost the lease",
        "fatal",
        "user-thread",
    )
    assert "reported at" in death.traceback  # never raised: where fatal() was called
    source.log.assert_closed_once_and_last()
    assert not GRACEFUL & set(source.log.names())


def test_fatal_inside_a_source_method_raises_there_and_counts_once(sqlite_store: Store) -> None:
    _topic(sqlite_store)
    seen: list[BaseException] = []

    def give_up(source: ScriptedSource) -> None:
        assert source.context is not None
        try:
            source.context.fatal(KeyError("gone"))
        except FatalError as exc:
            seen.append(exc)
            raise

    source = ScriptedSource(on_read=give_up)
    runner = _runner(sqlite_store, source)
    runner.start()
    finish(runner)

    assert len(seen) == 1
    assert runner.death is not None and runner.death.type == "KeyError"
    assert runner.death.thread == runner.name
    assert runner.stats.errors == 1
    source.log.assert_closed_once_and_last()


# --- stop modes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "final"), [("drain", SourceState.STOPPED), ("suspend", SourceState.SUSPENDED)]
)
def test_drain_and_suspend_append_what_was_read_then_shut_down_gracefully(
    sqlite_store: Store, mode: str, final: SourceState
) -> None:
    _topic(sqlite_store)
    source = ScriptedSource([Record("a")], then=None, final_records=[Record("from-prepare")])
    runner = _runner(sqlite_store, source)
    runner.start()
    wait_until(lambda: source.log.count("commit") >= 1, "the first commit")
    runner.stop(mode)
    finish(runner)

    assert runner.state is final
    assert _values(sqlite_store) == ["a", "from-prepare"]
    names = source.log.names()
    assert names[-5:] == ["prepare_to_shutdown", "ack", "commit", "shutdown", "close"]
    source.log.assert_closed_once_and_last()


def test_cancel_calls_close_only(sqlite_store: Store) -> None:
    _topic(sqlite_store)
    source = ScriptedSource(then=None, final_records=[Record("never")])
    runner = _runner(sqlite_store, source)
    runner.start()
    wait_until(lambda: runner.state is SourceState.RUNNING, "RUNNING")
    runner.stop("cancel")
    runner.stop("drain")  # too late: cancel is never turned back into a drain
    finish(runner)

    assert runner.state is SourceState.STOPPED
    assert not GRACEFUL & set(source.log.names())
    source.log.assert_closed_once_and_last()
    assert _values(sqlite_store) == []


def test_end_of_stream_is_a_drain(store: Store) -> None:
    _topic(store)
    transitions: list[tuple[str, str, str]] = []
    source = ScriptedSource([records("a", "b"), Record("c")], then=END_OF_STREAM)
    runner = _runner(store, source, transitions)
    runner.start()
    finish(runner)

    assert runner.state is SourceState.STOPPED
    assert runner.stop_mode == "drain"
    assert _values(store) == ["a", "b", "c"]
    assert [a.value for a in source.acked] == ["a", "b", "c"]
    assert source.log.names()[-3:] == ["prepare_to_shutdown", "shutdown", "close"]
    assert transitions[-2:] == [
        ("RUNNING", "STOPPING", "end of stream"),
        ("STOPPING", "STOPPED", "end of stream"),
    ]


def test_a_runner_stopped_before_it_started_never_opens(sqlite_store: Store) -> None:
    _topic(sqlite_store)
    source = ScriptedSource()
    runner = _runner(sqlite_store, source)
    runner.stop("drain")
    runner.start()
    assert runner.wait(0)
    assert runner.state is SourceState.STOPPED
    assert source.log.calls == []


def test_emits_after_the_end_are_dropped_and_counted(sqlite_store: Store) -> None:
    _topic(sqlite_store)
    source = ScriptedSource(then=END_OF_STREAM)
    runner = _runner(sqlite_store, source)
    runner.start()
    finish(runner)
    assert source.context is not None
    source.context.emit(Record("too late"))
    assert runner.stats.dropped == 1
    assert _values(sqlite_store) == []


# --- guarantees, batching, routing -------------------------------------------------------


@pytest.mark.parametrize(
    ("guarantee", "visible_at_ack"), [("at_least_once", 1), ("at_most_once", 0)]
)
def test_records_are_acked_after_their_append_commits_unless_at_most_once(
    store: Store, guarantee: str, visible_at_ack: int
) -> None:
    _topic(store)
    seen: list[int] = []
    source = ScriptedSource(
        [Record("a")],
        then=END_OF_STREAM,
        on_ack=lambda s, r: seen.append(len(_values(store))),
    )
    runner = _runner(store, source, processing_guarantees=guarantee)
    runner.start()
    finish(runner)
    assert seen == [visible_at_ack]
    assert _values(store) == ["a"]


def test_each_transaction_appends_at_most_batch_size_records(store: Store) -> None:
    _topic(store)
    source = ScriptedSource([records(*(f"r{i}" for i in range(25)))], then=END_OF_STREAM)
    runner = _runner(store, source, batch_size=10)
    runner.start()
    finish(runner)

    assert _values(store) == [f"r{i}" for i in range(25)]
    [partition] = TopicAdmin(store).stats("out")
    assert partition.segments == 3  # one segment per append transaction: 10 + 10 + 5
    assert runner.stats.commits == 3


def test_a_push_source_is_appended_in_batches_and_drained(store: Store) -> None:
    _topic(store)
    source = ThreadedPushSource(count=50)
    runner = _runner(store, source, batch_size=20, batch_timeout="50ms")
    runner.start()
    wait_until(lambda: runner.stats.appended == 50, "50 records appended")
    runner.stop("drain")
    finish(runner)

    values = _values(store)
    assert sorted(values) == sorted([f"push-{i}" for i in range(50)] + ["final-from-prepare"])
    assert max(s.segments for s in TopicAdmin(store).stats("out")) >= 3
    assert runner.state is SourceState.STOPPED
    assert source.log.names()[-2:] == ["shutdown", "close"]
    source.log.assert_closed_once_and_last()
    assert source.thread is not None and not source.thread.is_alive()


def test_a_record_may_name_another_topic(store: Store) -> None:
    _topic(store)
    _topic(store, "audit")
    source = ScriptedSource([[Record("main"), Record("side", topic="audit")]], then=END_OF_STREAM)
    runner = _runner(store, source)
    runner.start()
    finish(runner)
    assert _values(store) == ["main"]
    assert _values(store, "audit") == ["side"]


def test_a_value_the_topic_schema_refuses_is_fatal(store: Store) -> None:
    _topic(store, schema_type="json")
    source = ScriptedSource([Record("{not json")], then=END_OF_STREAM)
    runner = _runner(store, source)
    runner.start()
    finish(runner)
    assert runner.state is SourceState.ERROR
    assert runner.death is not None
    assert (runner.death.type, runner.death.origin) == ("PayloadError", "connector")
    assert "public/default/out" in runner.death.message
    assert "ack" not in source.log.names()
    source.log.assert_closed_once_and_last()


def test_effectively_once_needs_a_sequence_id(sqlite_store: Store) -> None:
    _topic(sqlite_store)
    source = ScriptedSource([Record("a")], then=END_OF_STREAM)
    runner = _runner(sqlite_store, source, processing_guarantees="effectively_once")
    runner.start()
    finish(runner)
    assert runner.death is not None
    assert "effectively_once needs a sequence_id" in runner.death.message


def test_effectively_once_drops_records_appended_by_an_earlier_run(store: Store) -> None:
    _topic(store, partitions=3)

    def run(values: range) -> SourceRunner:
        batch = [Record(f"v{i}", sequence_id=i, source_partition="feed") for i in values]
        runner = _runner(
            store,
            ScriptedSource([batch], then=END_OF_STREAM),
            processing_guarantees="EFFECTIVELY_ONCE",
        )
        runner.start()
        finish(runner)
        return runner

    first = run(range(10))
    # A restart that lost its progress reads 5..9 again, then new records.
    second = run(range(5, 15))

    assert (first.stats.appended, first.stats.deduplicated) == (10, 0)
    assert (second.stats.appended, second.stats.deduplicated) == (5, 5)
    assert sorted(_values(store), key=lambda v: int(v[1:])) == [f"v{i}" for i in range(15)]


# --- instances ---------------------------------------------------------------------------


def test_instances_run_in_parallel_and_stop_together(store: Store) -> None:
    _topic(store)
    sources = {i: ScriptedSource([Record(f"from-{i}")], then=None) for i in range(3)}
    seen: list[tuple[int, str, str]] = []
    group = SourceInstances(
        _config(parallelism=3),
        store,
        factory=lambda i: sources[i],
        on_transition=lambda i, old, new, cause: seen.append((i, old, new)),
    )
    assert group.state is SourceState.CREATED
    group.start()
    wait_until(lambda: group.stats.appended == 3, "one record from each instance")
    assert group.state is SourceState.RUNNING
    _concurrently(lambda: group.stop("suspend"), lambda: group.stop("suspend"))
    assert group.wait(WAIT_SECONDS)
    assert group.join(WAIT_SECONDS)

    assert group.state is SourceState.SUSPENDED
    assert sorted(_values(store)) == ["from-0", "from-1", "from-2"]
    for instance_id, source in sources.items():
        source.log.assert_closed_once_and_last()
        assert source.context is not None
        assert source.context.get_instance_id() == instance_id
        assert source.context.get_num_instances() == 3
    assert {(i, new) for i, _, new in seen if new == "SUSPENDED"} == {
        (0, "SUSPENDED"),
        (1, "SUSPENDED"),
        (2, "SUSPENDED"),
    }
    status = group.status()
    assert status.state == "SUSPENDED"
    assert [i.stats.appended for i in status.instances] == [1, 1, 1]


def test_one_dead_instance_makes_the_source_error_while_the_others_run(sqlite_store: Store) -> None:
    _topic(sqlite_store)
    sources = {0: ScriptedSource(then=None), 1: ScriptedSource(fail_in="read")}
    group = SourceInstances(_config(parallelism=2), sqlite_store, factory=lambda i: sources[i])
    group.start()
    assert group.runners[1].wait(WAIT_SECONDS)
    assert group.state is SourceState.ERROR
    assert group.runners[0].state is SourceState.RUNNING
    assert list(group.deaths) == [1]
    group.stop("cancel")
    assert group.wait(WAIT_SECONDS) and group.join(WAIT_SECONDS)
    for source in sources.values():
        source.log.assert_closed_once_and_last()


def test_a_read_that_does_not_return_delays_close_and_join_says_so(
    sqlite_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    _topic(sqlite_store)
    release = threading.Event()
    source = ScriptedSource(on_read=lambda s: release.wait(WAIT_SECONDS))
    runner = _runner(sqlite_store, source)
    runner.start()
    try:
        wait_until(lambda: runner.in_call == "read", "a read in progress")
        runner.stop("cancel")
        assert not runner.wait(0.2)
        assert not runner.join(0.2)
        assert "still in read() after 0.2 s; close() follows when it returns" in caplog.text
        assert source.log.count("close") == 0
    finally:
        release.set()
    finish(runner)
    source.log.assert_closed_once_and_last()
