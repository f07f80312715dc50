"""Query groups: one Spark query serves many functions (docs/architecture.md, "Groups").

A worker in this process, on the session's SparkSession and the test's
store (both backends): its functions are members of one group, so these
tests check per function what a function's own query promises: every input
one output per function, a member's failure or stop kept to that member.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.lifecycle import StopMode
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group import members
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings
from waiting import WAIT, until

FUNCS = Path(__file__).resolve().parents[1] / "funcs"


@pytest.fixture
def group_worker(spark: Any, store_url: str, data_dir: Path) -> Iterator[Worker]:
    """A worker in this process whose plain functions run in its default group."""
    worker = Worker(
        WorkerSettings.resolve(data_dir=data_dir, store_url=store_url, shutdown_timeout=60),
        spark=spark,
    )
    worker.open()
    yield worker
    worker.shutdown()


def _config(name: str, **fields: Any) -> FunctionConfig:
    return FunctionConfig.build(
        name=name,
        py=str(FUNCS / "named_echo.py"),
        classname="named_echo.NamedEcho",
        inputs=fields.pop("inputs", ["in"]),
        output=fields.pop("output", "out"),
        processing_guarantees="effectively_once",
        **fields,
    )


def _values(store: Store, topic: str = "out") -> collections.Counter[str]:
    consumer = Consumer(store, topic, initial_position="earliest")
    out: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        out.update(m.value.decode() for m in batch if m.value is not None)
    return out


def _await_values(
    store: Store, expected: collections.Counter[str], topic: str = "out", timeout: float = WAIT
) -> None:
    found = _values(store, topic)

    def arrived() -> bool:
        nonlocal found
        found = _values(store, topic)
        extra = found - expected
        assert not extra, f"outputs no input asked for, or repeated: {dict(extra)}"
        return found == expected

    def said() -> str:
        missing = expected - found
        return f"every output on {topic}; {sum(missing.values())} missing: {sorted(missing)[:10]}"

    until(arrived, said, timeout, every=0.3)


def _send(store: Store, values: list[str], topic: str = "in") -> None:
    Producer(store, topic).send_batch([Message(v.encode()) for v in values])


def _setup(worker: Worker, names: list[str], *topics: str, **fields: Any) -> Store:
    """The worker's store with topics ``in`` (2 partitions), ``out`` and ``topics``, and
    functions ``names`` created with ``fields``."""
    store = worker.open_store()
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", schema_type="string")
    for topic in topics:
        admin.create(topic, partitions=2, schema_type="string")
    for name in names:
        worker.create(_config(name, **fields), package_digest=None, who="test")
    return store


def _left(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    """What the group said of function ``name`` leaving it, checked for Spark's own words."""
    said = [
        r.getMessage()
        for r in caplog.records
        if r.name == "sparkfn.group" and f"member public/default/{name} left" in r.getMessage()
    ]
    for line in said:
        assert not any(w in line for w in ("py4j", "Py4J", "org.apache", "java.")), line
    return said


# How a member that left for killing its worker is said (issue 39): the exit code, as
# a function's own query says it.
CRASHER_LEFT = (
    "a batch it was in failed: Python worker exited with code 3 while processing a message "
    "of function public/default/crasher"
)


def _in_group(store: Store) -> set[str]:
    """The control ids of the default group's members now."""
    with store.read() as conn:
        return {m.control_id for m in members.members(conn, "default", store.sealer)}


@pytest.mark.long_running(60)
def test_fifty_functions_share_one_query_and_each_sees_every_input_once(
    group_worker: Worker,
) -> None:
    names = [f"g{i:02d}" for i in range(50)]
    store = _setup(group_worker, names)
    with store.read() as conn:
        assert [m.control_id for m in members.members(conn, "default", store.sealer)] == [
            f"public/default/{n}" for n in names
        ]
    sent = [f"m{i}" for i in range(20)]
    _send(store, sent[:10])
    _send(store, sent[10:])
    _await_values(store, collections.Counter(f"{n}:{v}" for n in names for v in sent))
    assert len(group_worker.spark.streams.active) == 1  # one query for all fifty


class Feeder:
    """Sends ``m0, m1, ...`` to ``in`` in small batches from a thread, until stopped."""

    def __init__(self, store: Store) -> None:
        self.producer = Producer(store, "in")
        self.sent: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            first = len(self.sent)
            values = [f"m{i}" for i in range(first, first + 5)]
            self.producer.send_batch([Message(v.encode()) for v in values])
            self.sent.extend(values)
            time.sleep(0.05)

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sent_now(self) -> list[str]:
        return list(self.sent)


def _state(worker: Worker, name: str) -> str:
    return str(worker.status(f"public/default/{name}").state)


def _await_state(worker: Worker, name: str, state: str, timeout: float = WAIT) -> None:
    until(
        lambda: _state(worker, name) == state,
        lambda: f"function {name} {state}, still {_state(worker, name)}",
        timeout,
        every=0.2,
    )


def _outputs_of(found: collections.Counter[str], name: str) -> collections.Counter[str]:
    return collections.Counter(
        {k.split(":", 1)[1]: n for k, n in found.items() if k.startswith(f"{name}:")}
    )


@pytest.mark.long_running(90)
def test_each_lifecycle_operation_applies_to_one_member_while_the_others_flow(
    group_worker: Worker,
) -> None:
    names = [f"f{i}" for i in range(8)]
    store = _setup(group_worker, names)
    fq = {n: f"public/default/{n}" for n in names}
    with Feeder(store) as feeder:
        time.sleep(1.0)
        # drain f0: it ends STOPPED with every input present when asked, once
        before_drain = feeder.sent_now()
        group_worker.stop(fq["f0"], mode=StopMode.DRAIN)
        # suspend f1, and start it again later: nothing lost or repeated across
        group_worker.stop(fq["f1"], mode=StopMode.SUSPEND)
        # restart f2; update f3 to two instances; delete f4
        group_worker.restart(fq["f2"])
        group_worker.update(_config("f3", parallelism=2), package_digest=None, who="test")
        group_worker.delete(fq["f4"])
        _await_state(group_worker, "f0", "STOPPED")
        _await_state(group_worker, "f1", "SUSPENDED")
        time.sleep(1.0)
        group_worker.start(fq["f1"])
        _await_state(group_worker, "f1", "RUNNING")
        time.sleep(1.0)
    sent = feeder.sent_now()
    every = collections.Counter(sent)
    running = ["f1", "f2", "f3", "f5", "f6", "f7"]
    found = _values(store)

    def all_out() -> bool:
        nonlocal found
        found = _values(store)
        for n in running:
            assert not _outputs_of(found, n) - every, (
                f"{n} repeated: {_outputs_of(found, n) - every}"
            )
        return all(_outputs_of(found, n) == every for n in running)

    def missing() -> str:
        counts = {n: len(every - _outputs_of(found, n)) for n in running}
        return f"every output of {running}; missing: {counts}"

    until(all_out, missing, WAIT, every=0.3)
    drained = _outputs_of(found, "f0")
    assert max(drained.values()) == 1
    assert set(before_drain) <= set(drained) <= set(sent)
    for name in ["f1", "f2", "f3", "f5"]:
        assert _state(group_worker, name) == "RUNNING"
    assert _in_group(store) == {fq[n] for n in running}
    assert len(group_worker.spark.streams.active) == 1  # never a query of their own


@pytest.mark.long_running(90)
def test_a_failing_member_is_kept_to_itself_while_the_others_flow(group_worker: Worker) -> None:
    good = [f"ok{i}" for i in range(4)]
    store = _setup(group_worker, good)
    # raises on every message: each goes to its dead-letter topic, the function keeps running
    group_worker.create(
        _config("raiser", user_config={"fail": "raise"}, max_message_retries=0),
        package_digest=None,
        who="test",
    )
    # fatal on every message: by default SHUTDOWN_FUNCTION, ERROR
    group_worker.create(
        _config("dier", user_config={"fail": "fatal"}), package_digest=None, who="test"
    )
    with Feeder(store) as feeder:
        _await_state(group_worker, "dier", "ERROR")
        time.sleep(1.0)
    every = collections.Counter(feeder.sent_now())
    _await_values(
        store, collections.Counter({f"{n}:{v}": c for n in good for v, c in every.items()})
    )
    assert _state(group_worker, "raiser") == "RUNNING"
    dead_letters = _values(store, "public/default/raiser-DLQ")

    def all_dead_lettered() -> bool:
        nonlocal dead_letters
        dead_letters = _values(store, "public/default/raiser-DLQ")
        assert not dead_letters - every
        return dead_letters == every

    until(
        all_dead_lettered,
        lambda: f"every dead letter; {len(every - dead_letters)} missing",
        WAIT,
        every=0.3,
    )
    status = group_worker.status("public/default/dier")
    assert status.instances[0].status.death_exception is not None
    assert "was told to die" in str(status.instances[0].status.death_exception)


@pytest.fixture
def budget_worker(spark: Any, store_url: str, data_dir: Path) -> Iterator[Worker]:
    """A group worker with small budgets: 2 s per member's part of a batch, 2,000 records.

    Not less: the others catch up after the sleeper's stall, at 100 msg/s; with a
    budget of 500, a stall of 15 s (a loaded machine restarting the group's query)
    filled theirs three batches in a row, and they were moved out as hot too."""
    worker = Worker(
        WorkerSettings.resolve(
            data_dir=data_dir,
            store_url=store_url,
            shutdown_timeout=60,
            group_member_seconds=2,
            group_member_budget=2000,
        ),
        spark=spark,
    )
    worker.open()
    yield worker
    worker.shutdown()


def _await_queries(worker: Worker, count: int, timeout: float = WAIT) -> None:
    until(
        lambda: len(worker.spark.streams.active) == count,
        lambda: f"{count} queries, still {len(worker.spark.streams.active)}",
        timeout,
        every=0.2,
    )


@pytest.mark.long_running(120)
def test_a_member_blocked_in_process_holds_the_others_for_its_budget_only(
    budget_worker: Worker,
) -> None:
    """It sleeps 60 s on one input: the others wait about its 2 s budget and a batch's
    restart, not 60 s; it is moved to a query of its own, where it ends its work alone."""
    good = [f"ok{i}" for i in range(3)]
    store = _setup(budget_worker, good)
    flag = budget_worker.settings.data_dir / "slept"
    slow = _config("sleeper", user_config={"sleep_on": "m10", "sleep": 60, "sleep_flag": str(flag)})
    budget_worker.create(slow, package_digest=None, who="test")
    with Feeder(store) as feeder:
        until(lambda: "m10" in feeder.sent_now(), "the feeder to send m10", WAIT, every=0.05)
        stalled_at = time.monotonic()  # the sleeper's group batch holds m10 from about now
        time.sleep(1.0)
        later = feeder.sent_now()[-1]
        expected = collections.Counter(f"{n}:{later}" for n in good)
        until(
            lambda: (_values(store) & expected) == expected,
            f"the others' outputs of {later} while the sleeper stalls (they waited for it)",
            30 - (time.monotonic() - stalled_at),
        )
        _await_queries(budget_worker, 2)  # the sleeper in a query of its own, and the group
        time.sleep(1.0)
    every = collections.Counter(feeder.sent_now())
    names = [*good, "sleeper"]
    _await_values(
        store, collections.Counter({f"{n}:{v}": c for n in names for v, c in every.items()})
    )
    assert _in_group(store) == {f"public/default/{n}" for n in good}
    assert _state(budget_worker, "sleeper") == "RUNNING"


@pytest.mark.long_running(120)
def test_a_flooded_member_gets_a_query_of_its_own_and_the_others_keep_up(
    budget_worker: Worker,
) -> None:
    """20,000 messages wait for one member (10 times its row budget): the others'
    inputs keep flowing meanwhile, and the flooded one is moved out after three full batches."""
    good = [f"ok{i}" for i in range(3)]
    store = _setup(budget_worker, good, "flood", "flood-out")
    backlog = [f"b{i}" for i in range(20_000)]
    for first in range(0, len(backlog), 5_000):
        _send(store, backlog[first : first + 5_000], "flood")
    budget_worker.create(
        _config("flooded", inputs=["flood"], output="flood-out", subscription_position="earliest"),
        package_digest=None,
        who="test",
    )
    with Feeder(store):
        _await_queries(budget_worker, 2)
        time.sleep(1.0)
    _await_values(store, collections.Counter(f"flooded:{v}" for v in backlog), topic="flood-out")
    assert _in_group(store) == {f"public/default/{n}" for n in good}


@pytest.mark.long_running(120)
def test_a_member_that_kills_its_python_worker_is_taken_out_and_the_others_flow(
    group_worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    """Its input ``exit`` ends the task's Python worker, and so the group's batch:
    the batch's members leave for queries of their own, the group goes on at once."""
    caplog.set_level(logging.WARNING, logger="sparkfn.group")
    good = [f"ok{i}" for i in range(3)]
    store = _setup(group_worker, good, "bomb")
    group_worker.create(_config("crasher", inputs=["bomb"]), package_digest=None, who="test")
    with Feeder(store) as feeder:
        time.sleep(1.0)
        _send(store, ["exit"], "bomb")
        until(
            lambda: "public/default/crasher" not in _in_group(store),
            "the crasher to leave the group",
            WAIT,
            every=0.2,
        )
        time.sleep(2.0)
    every = collections.Counter(feeder.sent_now())
    _await_values(
        store, collections.Counter({f"{n}:{v}": c for n in good for v, c in every.items()})
    )
    for name in good:
        assert _state(group_worker, name) == "RUNNING"
    # Its batch ran again isolated, which named the crasher's task and its exit code.
    assert any(CRASHER_LEFT in line for line in _left(caplog, "crasher")), caplog.text
    for name in good:
        _left(caplog, name)


@pytest.mark.long_running(60)
def test_a_member_whose_message_kills_its_worker_passes_it_on_a_query_of_its_own(
    group_worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    """The poison hunt covers a group member's batch (issue 39, point 4): taken out
    of the group, the member's own query splits the batch, dead-letters ``exit``
    with its cause and processes the rest once; the member stays RUNNING. The group
    says why it left with the worker's exit code (issue 39, point 5)."""
    caplog.set_level(logging.WARNING, logger="sparkfn.group")
    store = _setup(group_worker, [], "bomb")
    config = _config("crasher", inputs=["bomb"])
    group_worker.create(config, package_digest=None, who="test")
    Producer(store, "bomb").send_batch(
        [Message(v.encode()) for v in ("a", "b", "exit", "c", "d")], partition=0
    )
    _await_values(store, collections.Counter(f"crasher:{v}" for v in ("a", "b", "c", "d")))
    letters = until(
        lambda: (
            _values(store, config.default_dead_letter_topic)
            if TopicAdmin(store).exists(config.default_dead_letter_topic)
            else None
        ),
        "exit dead-lettered",
        timeout=WAIT,
    )
    assert letters == {"exit": 1}
    (letter,) = Consumer(
        store, config.default_dead_letter_topic, initial_position="earliest"
    ).receive()
    assert letter.properties["EXCEPTION"].startswith(
        "PythonWorkerCrashed: Python worker exited with code 3 while processing message 0:2 "
    ), letter.properties
    assert _state(group_worker, "crasher") == "RUNNING"
    assert "public/default/crasher" not in _in_group(store)
    assert [CRASHER_LEFT in line for line in _left(caplog, "crasher")] == [True], caplog.text


def test_a_start_checks_the_code_and_topics_once(
    group_worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each start checks the function's code and topics once (they were three times): a
    create, in a group or in a query of its own, an update's new version, a restart."""
    from sparkfn.runtime.query import build

    loads: list[str] = []
    real = build.load_function

    def counted(config: FunctionConfig) -> Any:
        loads.append(config.name)
        return real(config)

    monkeypatch.setattr(build, "load_function", counted)
    store = _setup(group_worker, ["once"])
    group_worker.create(_config("alone", dedicated=True), package_digest=None, who="test")
    assert sorted(loads) == ["alone", "once"]
    _send(store, ["x"])
    _await_values(store, collections.Counter({"once:x": 1, "alone:x": 1}))
    group_worker.update(_config("once", user_config={"v": 2}), package_digest=None, who="test")
    group_worker.restart("public/default/alone")
    _send(store, ["y"])
    _await_values(
        store, collections.Counter({"once:x": 1, "alone:x": 1, "once:y": 1, "alone:y": 1})
    )
    assert sorted(loads) == ["alone", "alone", "once", "once"]
