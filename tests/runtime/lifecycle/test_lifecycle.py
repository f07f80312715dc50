"""Lifecycle contracts on the real runtime (DESIGN.md 2.3; docs/lifecycle.md).

Every test runs a real query on the session's local Spark with
``funcs/recording.py``, which logs each call into each user object (with its
process and thread) to a file. The logs prove the order of calls per object:
``initialize`` once first; ``prepare_to_shutdown``/``shutdown`` only on drain
and suspend; ``close`` exactly once, last, for every object whose process
still lives; nothing after it.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.errors import FunctionFailedError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import WAIT, until

FUNCS = Path(__file__).resolve().parents[1] / "funcs"

pytestmark = pytest.mark.slow


@pytest.fixture
def lstore(data_dir: Path) -> Any:
    """A SQLite store (the lifecycle does not depend on the backend; the
    guarantee tests cover both)."""
    store = Store.open(None, data_dir)
    TopicAdmin(store).create("in", partitions=4, schema_type="string")
    TopicAdmin(store).create("out", schema_type="string")
    yield store
    store.close()


def _config(log: Path, **fields: Any) -> FunctionConfig:
    user_config = {"log": str(log), **fields.pop("user_config", {})}
    base: dict[str, Any] = {
        # A fresh name per test: Spark reuses Python workers between tests.
        "name": f"rec-{uuid.uuid4().hex[:8]}",
        "py": str(FUNCS / "recording.py"),
        "classname": "recording.Recording",
        "inputs": ["in"],
        "output": "out",
        "subscription_position": "earliest",
        "user_config": user_config,
        "max_records_per_batch": 20,
    }
    base.update(fields)
    return FunctionConfig.build(**base)


def _produce(store: Store, values: list[str], topic: str = "in") -> None:
    Producer(store, topic).send_batch([Message(v.encode()) for v in values])


def _outputs(store: Store) -> list[str]:
    consumer = Consumer(store, "out", initial_position="earliest")
    out = []
    while batch := consumer.receive(max_messages=10_000):
        out.extend(m.value.decode() for m in batch if m.value is not None)
    return out


def _calls(log: Path) -> dict[str, list[dict[str, Any]]]:
    per_object: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if log.exists():
        for line in log.read_text().splitlines():
            call = json.loads(line)
            per_object[call["obj"]].append(call)
    return per_object


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _check_sequences(log: Path, *, graceful: bool) -> dict[str, list[str]]:
    """Assert the per-object call order; returns the call names per object."""
    seen = {}
    for obj, calls in _calls(log).items():
        names = [c["call"] for c in calls]
        seen[obj] = names
        assert names[0] == "initialize", (obj, names)
        assert names.count("initialize") == 1, (obj, names)
        assert names.count("close") <= 1, (obj, names)
        if _alive(calls[0]["pid"]) or "crash" in names:
            # The process lives (or crashed in Python, closing on its way out).
            assert names.count("close") == 1, (obj, names)
        if "close" in names:
            assert names[-1] == "close", f"a call after close(): {obj} {names}"
        hooks = [n for n in names if n in ("prepare_to_shutdown", "shutdown")]
        if graceful:
            assert names.count("prepare_to_shutdown") <= 1 and names.count("shutdown") == 1, (
                obj,
                names,
            )
            last_process = max((i for i, n in enumerate(names) if n == "process"), default=0)
            assert all(names.index(h) > last_process for h in hooks), (obj, names)
            assert names.index("shutdown") == len(names) - 2, (obj, names)
        else:
            assert hooks == [], f"{obj}: graceful hooks on a non-graceful stop: {names}"
    assert seen, "no object recorded any call"
    return seen


def _wait_processed(log: Path, count: int, run: FunctionRun, timeout: float = WAIT) -> None:
    def processed() -> bool:
        calls = [c for cs in _calls(log).values() for c in cs if c["call"] == "process"]
        return len(calls) >= count

    def said() -> str:
        query = run.query
        progress = (query.status, query.lastProgress) if query is not None else None
        return f"{count} messages processed: {run.run_state} {run.transitions()} {progress}"

    until(processed, said, timeout, every=0.2)


def test_drain_processes_everything_pending_then_shuts_down_gracefully(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    values = [f"m{i}" for i in range(200)]
    _produce(lstore, values[:100])
    config = _config(log, parallelism=2)
    run = FunctionRun(config, store=lstore, spark=spark).start()
    _wait_processed(log, 20, run)
    _produce(lstore, values[100:])  # pending when the drain is asked: processed too
    # Stop asked twice, concurrently, from two threads: one drain, one close per object.
    threads = [threading.Thread(target=run.drain, args=(WAIT,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert run.drain(WAIT)  # and once more after it ended
    assert run.run_state == "STOPPED"
    outputs = _outputs(lstore)
    processed = [o.split(":", 1)[1] for o in outputs if not o.startswith("final:")]
    assert Counter(processed) == Counter(values)
    finals = [o for o in outputs if o.startswith("final:")]
    names = _check_sequences(log, graceful=True)
    # prepare_to_shutdown's output of the final batch is committed, for every
    # object the final batch reached, and of the others through the control thread.
    prepared = {obj for obj, ns in names.items() if "prepare_to_shutdown" in ns}
    assert {f.split(":")[2] for f in finals} == prepared
    assert {o.split(":")[1] for o in finals} == {"0", "1"}
    status = run.status()
    assert status.state == "STOPPED" and status.unclosed_objects == []
    assert [i.status.state for i in status.instances] == ["STOPPED", "STOPPED"]
    causes = [t["cause"] for t in run.transitions() if t["instance"] is None]
    assert causes[-2:] == ["drain requested", "drained"]


def test_suspend_then_start_processes_every_message_exactly_once(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    values = [f"m{i}" for i in range(300)]
    _produce(lstore, values)
    config = _config(
        log,
        parallelism=2,
        processing_guarantees="effectively_once",
        user_config={"sleep": 0.01},
    )
    checkpoint = tmp_path / "checkpoint"
    run = FunctionRun(config, store=lstore, spark=spark).start(checkpoint=checkpoint)
    _wait_processed(log, 40, run)
    assert run.suspend(WAIT)
    assert run.run_state == "SUSPENDED"
    assert run.status().unclosed_objects == []
    first = [o for o in _outputs(lstore) if not o.startswith("final:")]
    assert 0 < len(first) < len(values), "suspend should stop before the input ends"
    _check_sequences(log, graceful=True)
    more = [f"n{i}" for i in range(50)]
    _produce(lstore, more)
    again = FunctionRun(config, store=lstore, spark=spark).start(
        until_drained=True, checkpoint=checkpoint
    )
    assert again.wait(WAIT)
    assert again.run_state == "STOPPED"
    processed = [o.split(":", 1)[1] for o in _outputs(lstore) if not o.startswith("final:")]
    assert Counter(processed) == Counter(values + more), "not exactly once across suspend"
    _check_sequences(log, graceful=True)


def test_cancel_during_a_batch_closes_once_and_skips_graceful_hooks(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    _produce(lstore, [f"m{i}" for i in range(400)])
    config = _config(log, parallelism=2, user_config={"sleep": 0.05})
    run = FunctionRun(config, store=lstore, spark=spark).start()
    _wait_processed(log, 10, run)  # a batch is in flight: 20 messages x 50 ms
    threads = [threading.Thread(target=run.cancel, args=(WAIT,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert run.cancel(WAIT)
    assert run.run_state == "STOPPED"
    _check_sequences(log, graceful=False)
    assert run.status().unclosed_objects == []


def test_fatal_from_a_function_thread_terminates_within_10_s_without_restart(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    trigger = tmp_path / "fatal"
    _produce(lstore, [f"m{i}" for i in range(100)])
    config = _config(
        log,
        parallelism=1,
        user_config={"fatal_trigger": str(trigger), "sleep": 0.02},
    )
    run = FunctionRun(config, store=lstore, spark=spark).start()
    _wait_processed(log, 10, run)
    trigger.touch()
    with pytest.raises(FunctionFailedError, match="ValueError: boom"):
        run.wait(WAIT)
    called = min(float(t) for t in Path(f"{trigger}.called").read_text().split())
    assert run.run_state == "ERROR"
    error_at = next(
        t["at"] for t in run.transitions() if t["instance"] is None and t["to"] == "ERROR"
    )
    ended = datetime.fromisoformat(error_at).timestamp()
    assert ended - called < 10, f"terminated {ended - called:.1f} s after fatal()"
    status = run.status().instances[0].status
    death = status.death_exception
    assert death.type == "ValueError" and death.message == "boom"
    assert death.thread == "boom-thread" and death.origin == "fatal"
    assert status.num_fatal_exceptions == 1 and status.num_restarts == 0
    assert not any(t["to"] == "RESTARTING" for t in run.transitions())
    # No batch commits after the fatal: nothing produced after it is processed.
    committed = len(_outputs(lstore))
    _produce(lstore, [f"late{i}" for i in range(20)])
    time.sleep(2)
    assert len(_outputs(lstore)) == committed
    assert not any(o.split(":", 1)[1].startswith("late") for o in _outputs(lstore))
    _check_sequences(log, graceful=False)


def test_replace_instance_restarts_with_backoff_then_escalates(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    values = [f"m{i}" for i in range(80)]
    TopicAdmin(lstore).create("one", schema_type="string")
    _produce(lstore, values, "one")
    # One partition, 5 messages a batch: offsets 14, 29, 44, 59 and 74 end
    # every 3rd batch and crash the first time they are processed.
    config = _config(
        log,
        inputs=["one"],
        parallelism=1,
        max_records_per_batch=5,
        processing_guarantees="effectively_once",
        user_config={"crash_every": 15, "crashed_dir": str(crashed)},
        failure_policy={"max_restarts": 3, "backoff_initial": 0.2, "restart_window": "10m"},
    )
    run = FunctionRun(config, store=lstore, spark=spark).start()
    with pytest.raises(FunctionFailedError, match="Crash: crash at offset"):
        run.wait(WAIT * 2)
    assert run.run_state == "ERROR"
    transitions = run.transitions()
    restarting = [
        t["cause"] for t in transitions if t["to"] == "RESTARTING" and t["instance"] is None
    ]
    delays = [float(c.split("restarting in ")[1].split(" s")[0]) for c in restarting]
    assert delays == [0.2, 0.4, 0.8], restarting  # exponential backoff, 3 restarts
    final = [t for t in transitions if t["instance"] is None][-1]
    assert final["to"] == "ERROR" and "escalated" in final["cause"], final
    status = run.status()
    assert status.instances[0].status.num_restarts == 3
    # Correct output up to the batch of the 4th crash (offsets 55..59): 0..54 once.
    processed = Counter(o.split(":", 1)[1] for o in _outputs(lstore))
    assert processed == Counter(values[:55])
    _check_sequences(log, graceful=False)


def test_shutdown_instance_stops_one_instance_and_the_others_take_its_share(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    trigger = tmp_path / "crash"
    trigger.touch()
    values = [f"m{i}" for i in range(200)]
    _produce(lstore, values)
    config = _config(
        log,
        parallelism=4,
        processing_guarantees="effectively_once",
        user_config={"crash_instance": 2, "crash_trigger": str(trigger)},
        failure_policy={"on_failure": "SHUTDOWN_INSTANCE"},
    )
    run = FunctionRun(config, store=lstore, spark=spark).start()
    run.wait_for(
        lambda: run.status().instances[2].status.state == "ERROR",
        WAIT,
        "instance 2 shut down",
    )
    run.wait_for(
        lambda: (
            Counter(o.split(":", 1)[1] for o in _outputs(lstore) if not o.startswith("final:"))
            == Counter(values)
        ),
        WAIT,
        "every message processed by the other instances",
    )
    status = run.status()
    assert [i.status.state for i in status.instances] == [
        "RUNNING",
        "RUNNING",
        "ERROR",
        "RUNNING",
    ]
    assert "instance 2 crashed" in status.instances[2].status.error
    assert not any(o.startswith("2:") for o in _outputs(lstore))
    # Restarting the instance gives its share back.
    run.restart_instance(2)
    more = [f"n{i}" for i in range(100)]
    _produce(lstore, more)
    run.wait_for(
        lambda: any(o.startswith("2:n") for o in _outputs(lstore)),
        WAIT,
        "instance 2 processing again",
    )
    assert run.drain(WAIT)
    processed = Counter(o.split(":", 1)[1] for o in _outputs(lstore) if not o.startswith("final:"))
    assert processed == Counter(values + more)
    assert run.status().instances[2].status.state == "STOPPED"


def test_a_custom_handler_decides_and_its_choice_is_applied(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    calls = tmp_path / "handler.jsonl"
    os.environ["SPARKFN_TEST_HANDLER_LOG"] = str(calls)
    _produce(lstore, [f"m{i}" for i in range(40)])
    config = _config(
        log,
        parallelism=1,
        user_config={"crash_every": 10, "crashed_dir": str(crashed)},
        failure_policy={"handler": "failure_handler:handle"},
    )
    run = FunctionRun(config, store=lstore, spark=spark).start()
    with pytest.raises(FunctionFailedError, match="Crash: crash at offset 9"):
        run.wait(WAIT)
    assert run.run_state == "ERROR"  # the handler said SHUTDOWN_FUNCTION; the default would restart
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    assert len(seen) == 1
    assert seen[0]["type"] == "Crash" and "crash at offset" in seen[0]["message"]
    assert seen[0]["instances"] == [0] and seen[0]["fatal"] is False
    assert not any(t["to"] == "RESTARTING" for t in run.transitions())
    _check_sequences(log, graceful=False)


def test_stop_returns_at_once_and_the_supervisor_closes_each_object_once(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    _produce(lstore, [f"m{i}" for i in range(400)])
    config = _config(log, parallelism=2, user_config={"sleep": 0.02, "close_sleep": 2.0})
    run = FunctionRun(config, store=lstore, spark=spark).start()
    _wait_processed(log, 10, run)
    started = time.monotonic()
    ended = run.stop("cancel", timeout=0)
    took = time.monotonic() - started
    assert took < 1.0, f"stop('cancel', timeout=0) blocked for {took:.2f} s"
    assert not ended
    assert run.wait(WAIT)
    assert run.run_state == "STOPPED"
    # Each object of a living process was closed exactly once (an object whose
    # process Spark killed with its cancelled task gets none, by contract).
    names = _check_sequences(log, graceful=False)
    assert any(ns.count("close") == 1 for ns in names.values()), names
    assert run.status().unclosed_objects == []


def test_a_function_and_a_source_of_the_same_name_keep_their_own_records(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    from sparkfn.config.connector import SourceConfig
    from sparkfn.connectors.source.source_run import SourceRun
    from sparkfn.runtime.lifecycle import control

    log = tmp_path / "calls.jsonl"
    config = _config(log, parallelism=2)
    source_config = SourceConfig(
        name=config.name, source_type="generator", output="in", configs={"count": 5}
    )
    source = SourceRun(source_config, lstore).start()
    assert source.wait(WAIT) and source.join(WAIT)
    assert source.state == "STOPPED"
    run = FunctionRun(config, store=lstore, spark=spark).start(until_drained=True)
    assert run.wait(WAIT)

    function_record = control.read_control(lstore, config.fqfn)
    source_id = control.control_id("source", config.fqfn)
    source_record = control.read_control(lstore, source_id)
    assert function_record is not None and source_record is not None
    assert (function_record.state, function_record.epoch) == ("STOPPED", 1)
    assert (source_record.state, source_record.epoch) == ("STOPPED", 1)
    assert sorted(function_record.instances) == [0, 1]
    assert sorted(source_record.instances) == [0]
    assert [i.status.state for i in run.status().instances] == ["STOPPED", "STOPPED"]
    source_moves = [(t["instance"], t["to"]) for t in source.transitions()]
    assert source_moves.count((None, "STARTING")) == 1
    function_moves = [(t["instance"], t["to"]) for t in run.transitions()]
    assert function_moves.count((None, "STARTING")) == 1
    assert (1, "RUNNING") in function_moves and (1, "RUNNING") not in source_moves
    outputs = [o for o in _outputs(lstore) if not o.startswith("final:")]
    assert len(outputs) == 5  # the source's five records, through the function


def _instance_objects(log: Path, instance: int) -> dict[str, list[str]]:
    """The call names of each object of ``instance``."""
    return {
        obj: [c["call"] for c in calls]
        for obj, calls in _calls(log).items()
        if calls[0]["instance"] == instance
    }


def _closed_gracefully(log: Path, instance: int) -> dict[str, list[str]]:
    """Assert every object of ``instance`` was closed gracefully, once, last."""
    objects = _instance_objects(log, instance)
    assert objects, f"instance {instance} made no object"
    for obj, names in objects.items():
        assert names[0] == "initialize" and names.count("initialize") == 1, (obj, names)
        assert names.count("close") == 1 and names[-1] == "close", (obj, names)
        assert names[-2] == "shutdown", (obj, names)
    return objects


def test_one_instance_suspended_mid_stream_leaves_gracefully_and_the_others_take_its_share(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    values = [f"m{i}" for i in range(300)]
    _produce(lstore, values)
    config = _config(
        log,
        parallelism=3,
        processing_guarantees="effectively_once",
        user_config={"sleep": 0.01},
    )
    run = FunctionRun(config, store=lstore, spark=spark).start()
    _wait_processed(log, 40, run)
    run.suspend_instance(1)
    run.suspend_instance(1)  # asked twice: one stop
    run.wait_for(
        lambda: run.status().instances[1].status.state == "STOPPED", WAIT, "instance 1 suspended"
    )
    assert run.run_state == "RUNNING"
    assert [i.status.state for i in run.status().instances] == ["RUNNING", "STOPPED", "RUNNING"]
    closed = _closed_gracefully(log, 1)
    more = [f"n{i}" for i in range(150)]
    _produce(lstore, more)
    run.wait_for(
        lambda: (
            Counter(o.split(":", 1)[1] for o in _outputs(lstore) if not o.startswith("final:"))
            == Counter(values + more)
        ),
        WAIT,
        "every message processed once, by the other instances after the suspend",
    )
    assert not any(o.startswith("1:n") for o in _outputs(lstore))  # its share went to 0 and 2
    assert _instance_objects(log, 1) == closed  # nothing called on it since
    cause = [t for t in run.transitions() if t["instance"] == 1][-1]
    assert (cause["from"], cause["to"]) == ("STOPPING", "STOPPED"), cause
    assert cause["cause"].startswith("suspended"), cause
    # Started again, it takes its share back.
    run.restart_instance(1)
    last = [f"k{i}" for i in range(150)]
    _produce(lstore, last)
    run.wait_for(
        lambda: any(o.startswith("1:k") for o in _outputs(lstore)), WAIT, "instance 1 back"
    )
    assert run.drain(WAIT)
    processed = Counter(o.split(":", 1)[1] for o in _outputs(lstore) if not o.startswith("final:"))
    assert processed == Counter(values + more + last), "not exactly once across the suspend"
    _check_sequences(log, graceful=True)
    assert run.status().unclosed_objects == []


def test_one_instance_drained_processes_the_input_as_of_the_drain_then_leaves(
    spark: Any, lstore: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    values = [f"m{i}" for i in range(300)]
    _produce(lstore, values[:100])
    config = _config(
        log,
        parallelism=2,
        processing_guarantees="effectively_once",
        user_config={"sleep": 0.02},
    )
    run = FunctionRun(config, store=lstore, spark=spark).start()
    _wait_processed(log, 20, run)
    _produce(lstore, values[100:])  # in the input when the drain is asked: processed first
    run.drain_instance(1)
    run.wait_for(
        lambda: run.status().instances[1].status.state == "STOPPED", WAIT, "instance 1 drained"
    )
    at_stop = Counter(o.split(":", 1)[1] for o in _outputs(lstore) if not o.startswith("final:"))
    assert set(at_stop) >= set(values), "an instance's drain ended before the input as of it"
    assert max(at_stop.values()) == 1
    assert any(o.startswith("1:") for o in _outputs(lstore))
    assert run.status().instances[0].status.state == "RUNNING"
    closed = _closed_gracefully(log, 1)
    more = [f"n{i}" for i in range(100)]
    _produce(lstore, more)
    assert run.drain(WAIT)
    outputs = _outputs(lstore)
    processed = Counter(o.split(":", 1)[1] for o in outputs if not o.startswith("final:"))
    assert processed == Counter(values + more)
    assert not any(o.startswith("1:n") for o in outputs)
    assert _instance_objects(log, 1) == closed
    step = [t for t in run.transitions() if t["instance"] == 1 and t["to"] == "STOPPED"][0]
    assert step["cause"].startswith("drained"), step
    _check_sequences(log, graceful=True)


@pytest.mark.parametrize("mode", ["drain", "suspend"])
def test_a_drain_of_the_run_while_every_instance_stops_alone_ends(
    spark: Any, lstore: Store, tmp_path: Path, mode: str
) -> None:
    """Every instance stopping alone leaves the reader nothing to plan for them; a drain
    (or suspend) of the whole run asked meanwhile must still end (nothing left to drain),
    not wait for an end-of-stream batch that is never planned. Whether the run's stop
    meets the instances running, stopping or stopped is up to the supervisor's thread:
    every order must end."""
    log = tmp_path / "calls.jsonl"
    values = [f"m{i}" for i in range(100)]
    _produce(lstore, values)
    config = _config(log, parallelism=2, user_config={"sleep": 0.01})
    run = FunctionRun(config, store=lstore, spark=spark).start()
    _wait_processed(log, 10, run)
    run.suspend_instance(0)
    run.suspend_instance(1)
    assert run.stop(mode, timeout=WAIT), f"the {mode} of a run whose instances stopped alone"
    assert run.run_state == ("STOPPED" if mode == "drain" else "SUSPENDED")
    _check_sequences(log, graceful=True)
    status = run.status()
    assert status.unclosed_objects == []
    # Stopped alone (STOPPED), or ended with the run (its state), each as it met the stop.
    ended = {"STOPPED", "STOPPED" if mode == "drain" else "SUSPENDED"}
    assert {i.status.state for i in status.instances} <= ended, status.instances


@pytest.mark.parametrize("mode", ["drain", "suspend"])
def test_a_stop_of_the_run_after_its_one_instance_stopped_alone_ends_and_loses_nothing(
    spark: Any, lstore: Store, tmp_path: Path, mode: str
) -> None:
    """The run's only instance stopped alone (closed, ``STOPPED``): the run's drain or
    suspend has no instance to end the stream in, and ends at once; the instance stays
    as it ended, and what it left in the input is processed once by the next run."""
    log = tmp_path / "calls.jsonl"
    values = [f"m{i}" for i in range(150)]
    _produce(lstore, values)
    config = _config(
        log,
        parallelism=1,
        processing_guarantees="effectively_once",
        user_config={"sleep": 0.01},
    )
    checkpoint = tmp_path / "checkpoint"
    run = FunctionRun(config, store=lstore, spark=spark).start(checkpoint=checkpoint)
    _wait_processed(log, 10, run)
    run.suspend_instance(0)
    run.wait_for(
        lambda: run.status().instances[0].status.state == "STOPPED", WAIT, "instance 0 suspended"
    )
    closed = _closed_gracefully(log, 0)
    assert run.stop(mode, timeout=WAIT), f"the {mode} of a run whose instance stopped alone"
    assert run.run_state == ("STOPPED" if mode == "drain" else "SUSPENDED")
    assert _instance_objects(log, 0) == closed  # closed once; nothing called on it since
    step = [t for t in run.transitions() if t["instance"] == 0][-1]
    assert (step["to"], step["cause"].split(" ")[0]) == ("STOPPED", "suspended"), step
    assert run.status().unclosed_objects == []
    again = FunctionRun(config, store=lstore, spark=spark).start(
        until_drained=True, checkpoint=checkpoint
    )
    assert again.wait(WAIT)
    processed = Counter(o.split(":", 1)[1] for o in _outputs(lstore) if not o.startswith("final:"))
    assert processed == Counter(values), "not exactly once across the instance's suspend"
    _check_sequences(log, graceful=True)
