"""Sinks on Spark: a sink runs as a function whose only object is the sink.

Three cheap tests drive the adapter without Spark (the function harness runs
the same per-message engine) or stop before Spark starts. Three run a real
query on the session's local Spark with ``sinks/recording_sink.py``, a file
sink that logs every call into every object (with its process, ``id(self)``
and thread): a drained run writes every message exactly once with the calls
in order; a fatal from the sink's own thread ends the run in ERROR within
10 s and nothing is written after it; a ``write()`` that raises dead-letters
its message and the sink goes on.
Last, ``sparkfn sinks localrun`` as a user runs it, in a child process: a bad
sink type fails before Spark starts, and a drained run exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.errors import (
    BrokerUnreachableError,
    ConfigError,
    ConnectorFailedError,
    ConnectorLoadError,
    FatalError,
)
from sparkfn.config.connector import SinkConfig
from sparkfn.connectors.sink.sink_config import (
    ADAPTER_CLASSNAME,
    SINK_CONFIG_KEY,
    sink_config_of,
    sink_function_config,
)
from sparkfn.connectors.sink.sink_run import SinkRun, validate_sink
from sparkfn.runtime.function.loader import load_function
from sparkfn.store.store import Store
from sparkfn.testing import FunctionHarness
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.autocreate import TopicCreation
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import WAIT, until

SINKS = Path(__file__).resolve().parent / "sinks"
RECORDING = str(SINKS / "recording_sink.py")
EVENT_MS = 1_714_564_800_123  # 2024-05-01T12:00:00.123Z
EVENT_TIME = datetime.fromtimestamp(EVENT_MS / 1000, UTC)


def _sink(tmp_path: Path, **fields: Any) -> SinkConfig:
    configs = {
        "log": str(tmp_path / "calls.jsonl"),
        "path": str(tmp_path / "out" / "sink-{instance}.jsonl"),
        **fields.pop("configs", {}),
    }
    base: dict[str, Any] = {
        # A fresh name per test: Spark reuses Python workers between tests.
        "name": f"rec-{uuid.uuid4().hex[:8]}",
        "py": RECORDING,
        "inputs": ["in"],
        "configs": configs,
        "max_records_per_batch": 10,
        "subscription_position": "earliest",  # the tests fill the input first
    }
    base.update(fields)
    built: SinkConfig = SinkConfig.build(**base)
    return built


def _calls(tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    per_object: dict[str, list[dict[str, Any]]] = defaultdict(list)
    log = tmp_path / "calls.jsonl"
    if log.exists():
        for line in log.read_text().splitlines():
            call = json.loads(line)
            per_object[call["obj"]].append(call)
    return per_object


def _written(tmp_path: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted((tmp_path / "out").glob("*.jsonl")):
        lines.extend(json.loads(line) for line in path.read_text().splitlines())
    return lines


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _check_objects(tmp_path: Path, *, graceful: bool) -> dict[str, list[str]]:
    """Per object: open first and once, close once and last, hooks only when graceful."""
    seen = {}
    for obj, calls in _calls(tmp_path).items():
        names = [c["call"] for c in calls]
        seen[obj] = names
        assert names[0] == "open" and names.count("open") == 1, (obj, names)
        assert names.count("close") <= 1, (obj, names)
        if _alive(calls[0]["pid"]):
            # Spark kills the other Python workers of a failing task (e.g. the
            # source reader's); objects there die with their process unclosed.
            assert names.count("close") == 1, (obj, names)
        if "close" in names:
            assert names[-1] == "close", f"a call after close(): {obj} {names}"
        assert set(names) <= {"open", "write", "flush", "prepare_to_shutdown", "shutdown", "close"}
        hooks = [n for n in names if n in ("prepare_to_shutdown", "shutdown")]
        if graceful:
            assert names.count("prepare_to_shutdown") <= 1, (obj, names)
            assert names[-2] == "shutdown" and names.count("shutdown") == 1, (obj, names)
            last_write = max((i for i, n in enumerate(names) if n == "write"), default=0)
            assert all(names.index(h) > last_write for h in hooks), (obj, names)
        else:
            assert hooks == [], f"{obj}: graceful hooks on a non-graceful stop: {names}"
    assert seen, "no sink object recorded any call"
    return seen


# the shared bounded wait (tests/waiting.py), with this module's timeout
_wait_until = partial(until, timeout=WAIT)


def _at(transition: dict[str, Any]) -> float:
    at = datetime.fromisoformat(transition["at"])
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


@pytest.fixture
def sstore(data_dir: Path) -> Any:
    """A SQLite store (the sink runtime does not depend on the backend)."""
    store = Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir)
    TopicAdmin(store).create("in", partitions=4, schema_type="string")
    TopicAdmin(store).create("one", partitions=1, schema_type="string")
    yield store
    store.close()


def _produce(store: Store, values: list[str], topic: str = "in") -> None:
    Producer(store, topic).send_batch(
        [
            Message(v.encode(), key=f"k-{v}", properties={"n": v}, event_time=EVENT_TIME)
            for v in values
        ]
    )


# --- cheap: the adapter without Spark, and validation -------------------------------------


def test_the_adapter_maps_messages_to_records_and_flushes_per_batch(tmp_path: Path) -> None:
    sink = _sink(tmp_path, inputs=["orders"], configs={"fail_on": {"id": 3}}, max_message_retries=0)
    config = sink_function_config(sink)
    assert config.classname == ADAPTER_CLASSNAME and config.output is None
    assert config.py is None and sink_config_of(config) == sink
    assert config.user_config[SINK_CONFIG_KEY]["py"] == RECORDING
    load_function(config)  # the runtime's loader accepts it
    harness = FunctionHarness(config, input_schema="json")
    assert harness.send({"id": 1}, key="alice", properties={"p": "1"}, event_time=EVENT_MS) == []
    harness.send_many([{"id": 2}])
    lines = _written(tmp_path)
    assert lines[0] == {
        "topic": "public/default/orders",
        "message_id": "0:0",
        "key": "alice",
        "value": {"id": 1},  # decoded per the topic's schema, as a function gets it
        "properties": {"p": "1"},
        "event_time": "2024-05-01T12:00:00.123000+00:00",
    }
    assert [line["value"] for line in lines] == [{"id": 1}, {"id": 2}]
    # write() raising fails that message: it is dead-lettered with its cause, and the
    # sink goes on with the next one.
    assert harness.send_many([{"id": 3}, {"id": 4}]) == []
    ((value, props),) = harness.dead_letters
    assert value == {"id": 3} and props["EXCEPTION"] == "RuntimeError: cannot write {'id': 3}"
    assert harness.stats.user_exceptions == 1
    assert [line["value"] for line in _written(tmp_path)] == [{"id": 1}, {"id": 2}, {"id": 4}]
    harness.close()
    harness.close()
    (names,) = _check_objects(tmp_path, graceful=False).values()
    assert names == ["open", "write", "flush", "write", "flush", "write", "write", "flush", "close"]


def test_a_failing_open_is_fatal_and_the_sink_is_still_closed_once(tmp_path: Path) -> None:
    # The file sink's open() rejects an unknown setting; close() follows all the same.
    sink = _sink(tmp_path, configs={"colour": "red"})
    harness = FunctionHarness(sink_function_config(sink))
    with pytest.raises(FatalError, match="configs.colour: unknown setting") as caught:
        harness.send("a")
    assert f"raised by open() of sink {sink.fqn}" in str(caught.value.__cause__.__notes__)  # type: ignore[union-attr]
    harness.close()
    (names,) = _check_objects(tmp_path, graceful=False).values()
    assert names == ["open", "close"]


def test_validation_names_the_sink_the_field_and_the_value(sstore: Store, tmp_path: Path) -> None:
    with pytest.raises(ConnectorLoadError, match=r"sink public/default/s: sink_type 'nope' is not"):
        validate_sink(sstore, SinkConfig.build(name="s", sink_type="nope", inputs=["in"]))
    with pytest.raises(
        ConfigError, match=r"sink public/default/s: inputs topic public/default/gone"
    ):
        validate_sink(sstore, SinkConfig.build(name="s", sink_type="file", inputs=["gone"]))
    # Where topics are created on first use (a worker, sinks localrun), the input is made;
    # a sink refused for its code makes none.
    creation = TopicCreation.read(sstore)
    with pytest.raises(ConnectorLoadError):
        validate_sink(
            sstore, SinkConfig.build(name="s", sink_type="nope", inputs=["new"]), creation
        )
    validate_sink(sstore, SinkConfig.build(name="s", sink_type="file", inputs=["gone"]), creation)
    assert [str(t.name) for t in TopicAdmin(sstore).list() if t.name.name in ("gone", "new")] == [
        "public/default/gone"
    ]
    missing = str(tmp_path / "missing.py")
    with pytest.raises(ConnectorLoadError, match=r"sink public/default/s: py file .*missing.py"):
        validate_sink(sstore, SinkConfig.build(name="s", py=missing, inputs=["in"]))
    # SinkRun checks before Spark (no session is given or created) and records the ERROR.
    run = SinkRun(SinkConfig.build(name="s", sink_type="nope", inputs=["in"]), store=sstore)
    with pytest.raises(ConnectorLoadError):
        run.start()
    assert run._spark is None
    assert run.status().state == "ERROR"


# --- on Spark --------------------------------------------------------------------------------


@pytest.mark.slow
def test_until_drained_writes_every_message_exactly_once_with_calls_in_order(
    spark: Any, sstore: Store, tmp_path: Path
) -> None:
    values = [f"m{i}" for i in range(60)]
    _produce(sstore, values)
    sink = _sink(tmp_path, parallelism=2)
    run = SinkRun(sink, store=sstore, spark=spark).start(until_drained=True)
    assert run.wait(WAIT)
    assert run.run_state == "STOPPED"
    lines = _written(tmp_path)
    assert Counter(line["value"] for line in lines) == Counter(values), "not exactly once"
    first = next(line for line in lines if line["value"] == "m0")
    assert first["topic"] == "public/default/in" and first["key"] == "k-m0"
    assert first["properties"] == {"n": "m0"}
    assert first["event_time"] == "2024-05-01T12:00:00.123000+00:00"
    partition, offset = first["message_id"].split(":")
    assert 0 <= int(partition) < 4 and int(offset) >= 0
    # Both instances wrote, each to its own file ({instance} in the path).
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"sink-0.jsonl", "sink-1.jsonl"}
    names = _check_objects(tmp_path, graceful=True)
    calls = [c for cs in _calls(tmp_path).values() for c in cs]
    assert Counter(c["value"] for c in calls if c["call"] == "write") == Counter(values)
    for obj, object_names in names.items():
        if "write" in object_names:
            last_write = len(object_names) - 1 - object_names[::-1].index("write")
            assert "flush" in object_names[last_write:], f"{obj}: a write never flushed"
    opened = [c for c in calls if c["call"] == "open"]
    assert {c["name"] for c in opened} == {sink.name}
    assert all(c["topics"] == ["public/default/in"] for c in opened)
    status = run.status()
    assert status.state == "STOPPED" and status.unclosed_objects == []
    assert [i.status.state for i in status.instances] == ["STOPPED", "STOPPED"]
    assert sum(i.status.num_successfully_processed for i in status.instances) == 60
    causes = [t["cause"] for t in run.transitions() if t["instance"] is None]
    assert causes[-2:] == ["drain requested", "drained"]


def test_a_drained_sink_passes_a_message_that_kills_its_worker(
    spark: Any, sstore: Store, tmp_path: Path
) -> None:
    """The poison hunt covers a sink's batch (issue 39, point 4): over ``a b exit c d``
    the drain's batch crashes, ``exit`` goes to the sink's dead-letter topic with its
    cause, and the others are written; the run ends STOPPED."""
    _produce(sstore, ["a", "b", "exit", "c", "d"], topic="one")
    sink = _sink(tmp_path, inputs=["one"], configs={"exit_on": "exit"})
    run = SinkRun(sink, store=sstore, spark=spark).start(until_drained=True)
    assert run.wait(WAIT)
    assert run.run_state == "STOPPED"
    # A crashed batch's writes before the crash may be in the file too: the set, not the count.
    assert {line["value"] for line in _written(tmp_path)} == {"a", "b", "c", "d"}
    (instance,) = run.status().instances
    assert (instance.status.num_successfully_processed, instance.status.num_system_exceptions) == (
        4,
        1,
    )
    dlq = sink_function_config(sink).default_dead_letter_topic
    (letter,) = Consumer(sstore, dlq, initial_position="earliest").receive()
    assert letter.value == b"exit"
    assert letter.properties["EXCEPTION"].startswith(
        "PythonWorkerCrashed: Python worker exited with code 3 while processing message 0:2 "
    ), letter.properties


@pytest.mark.slow
def test_a_fatal_from_the_sinks_own_thread_ends_the_run_within_10_s(
    spark: Any, sstore: Store, tmp_path: Path
) -> None:
    trigger = tmp_path / "trigger"
    values = [f"m{i}" for i in range(30)]
    _produce(sstore, values)
    sink = _sink(tmp_path, configs={"fatal_trigger": str(trigger)})
    run = SinkRun(sink, store=sstore, spark=spark).start()

    def committed() -> int:
        return int(run.status().instances[0].status.num_successfully_processed)

    _wait_until(lambda: committed() == len(values), "committing the first messages")
    trigger.touch()
    returned = Path(f"{trigger}.returned")
    _wait_until(returned.exists, "the sink thread's fatal call")
    fatal_at = float(Path(f"{trigger}.called").read_text().split()[0])
    late = [f"late{i}" for i in range(20)]
    _produce(sstore, late)  # after the fatal: never written
    with pytest.raises(ConnectorFailedError, match=rf"sink {sink.fqn} failed: ValueError: boom"):
        run.wait(WAIT)

    status = run.status()
    assert status.state == "ERROR"
    (instance,) = status.instances
    assert instance.status.state == "ERROR"
    death = instance.status.death_exception
    assert (death.type, death.message) == ("ValueError", "boom")
    assert death.thread == "sink-flusher" and death.origin == "fatal"
    assert instance.status.num_fatal_exceptions == 1
    assert instance.status.num_restarts == 0 and status.num_restarts == 0
    assert status.unclosed_objects == []
    # No batch committed after the fatal, and nothing produced after it reached the sink.
    assert committed() == len(values)
    calls = [c for cs in _calls(tmp_path).values() for c in cs]
    assert not [c for c in calls if c["call"] == "write" and c["value"].startswith("late")]
    assert Counter(line["value"] for line in _written(tmp_path)) == Counter(values)
    _check_objects(tmp_path, graceful=False)
    # Terminated within 10 s of the call: the run's ERROR transition is recorded by then.
    (error,) = [t for t in run.transitions() if t["instance"] is None and t["to"] == "ERROR"]
    elapsed = _at(error) - fatal_at
    print(f"fatal to ERROR: {elapsed:.2f} s")
    assert 0 <= elapsed < 10, f"fatal to ERROR took {elapsed:.1f} s"
    assert "SHUTDOWN_FUNCTION" in error["cause"]


@pytest.mark.slow
def test_a_write_that_raises_dead_letters_its_message_and_the_sink_goes_on(
    spark: Any, sstore: Store, tmp_path: Path
) -> None:
    values = [f"m{i}" for i in range(20)]
    _produce(sstore, values, topic="one")
    sink = _sink(
        tmp_path,
        inputs=["one"],
        max_records_per_batch=5,
        configs={"fail_on": "m7"},
        max_message_retries=0,  # dead-lettered at once (unset: delivered again without end)
    )
    run = SinkRun(sink, store=sstore, spark=spark).start(until_drained=True)
    run.wait(WAIT)  # raises if the sink died
    status = run.status()
    assert status.state == "STOPPED" and status.num_restarts == 0
    (instance,) = status.instances
    assert instance.status.num_user_exceptions == 1 and instance.status.num_fatal_exceptions == 0
    written = [line["value"] for line in _written(tmp_path)]
    assert sorted(written) == sorted(v for v in values if v != "m7")  # each once
    dead = Consumer(sstore, f"public/default/{sink.name}-DLQ", initial_position="earliest")
    (letter,) = dead.receive(max_messages=10)
    assert letter.value == b"m7"
    assert letter.properties["EXCEPTION"] == "RuntimeError: cannot write m7"
    assert letter.properties["REAL_TOPIC"] == "persistent://public/default/one"
    _check_objects(tmp_path, graceful=True)


@pytest.mark.slow
def test_a_flush_that_raises_restarts_the_instance_and_its_batch_is_written_again(
    spark: Any, sstore: Store, tmp_path: Path
) -> None:
    # It was fatal: ERROR with 0 restarts. Now the failure policy's on_failure
    # (REPLACE_INSTANCE) restarts it, and the uncommitted batch is written then.
    _fails_once_then_writes_every_message_once(spark, sstore, tmp_path, "fail_flush_once")


def test_an_open_that_cannot_reach_its_broker_fails_the_task_and_dead_letters_nothing(
    tmp_path: Path,
) -> None:
    # A broker that is down (its restart) is no fault of the sink: not fatal, and the
    # task's messages are neither written nor failed one by one; its end raises.
    sink = _sink(tmp_path, configs={"unreachable_once": str(tmp_path / "down")})
    harness = FunctionHarness(sink_function_config(sink))
    with pytest.raises(BrokerUnreachableError, match="cannot reach the broker") as caught:
        harness.send_many(["a", "b"])
    assert not isinstance(caught.value, FatalError)
    assert harness.dead_letters == [] and harness.stats.user_exceptions == 0
    assert _written(tmp_path) == []
    harness.close()


def test_a_sink_whose_broker_is_down_at_open_is_reopened_and_writes_every_message_once(
    spark: Any, sstore: Store, tmp_path: Path
) -> None:
    # It was fatal (an open error): ERROR for good after one broker restart. Now the
    # failure policy reopens it and the uncommitted batch is written then.
    _fails_once_then_writes_every_message_once(spark, sstore, tmp_path, "unreachable_once")


# --- the CLI, in a child process ---------------------------------------------------------------


def _cli(data_dir: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
    env["SPARKFN_DATA_DIR"] = str(data_dir)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "sparkfn.cli.main", "sinks", "localrun", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )


def _describe(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"


def test_cli_a_bad_sink_type_is_one_error_line_before_spark_starts(
    sstore: Store, data_dir: Path
) -> None:
    done = _cli(data_dir, "--sink-type", "nope", "--inputs", "in", timeout=120)
    assert done.returncode == 1, _describe(done)
    assert done.stderr.splitlines()[-1].startswith(
        "error [connector_load_error]: sink public/default/nope: sink_type 'nope' is not a "
        "built-in sink (known: file, mqtt, nats, postgres, rabbitmq, redis, stdout)"
    ), _describe(done)
    assert "Traceback" not in done.stderr and "SparkContext" not in done.stderr


@pytest.mark.slow
def test_cli_localrun_until_drained_writes_everything_and_exits_0(
    sstore: Store, data_dir: Path, tmp_path: Path
) -> None:
    values = [f"m{i}" for i in range(25)]
    _produce(sstore, values)
    out = tmp_path / "archive.jsonl"
    done = _cli(
        data_dir,
        "--sink-type", "file",
        "--name", "archive",
        "--inputs", "in",
        "--configs", json.dumps({"path": str(out)}),
        "--parallelism", "2",
        "--subscription-position", "Earliest",
        "--processing-guarantees", "ATLEAST_ONCE",
        "--until-drained",
        "--json-status",
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, _describe(done)
    assert "sparkfn/cli/" not in done.stderr, _describe(done)
    status = json.loads(done.stdout.strip().splitlines()[-1])
    assert status["name"] == "public/default/archive" and status["state"] == "STOPPED"
    assert [i["status"]["state"] for i in status["instances"]] == ["STOPPED", "STOPPED"]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert Counter(line["value"] for line in lines) == Counter(values)


def test_a_sink_reads_with_a_subscription_of_its_own() -> None:
    from sparkfn.config.function import FunctionConfig

    sink = SinkConfig.build(name="audit", inputs=["orders"], sink_type="file")
    function = FunctionConfig.build(name="audit", inputs=["orders"], py="examples/exclamation.py")
    assert sink_function_config(sink).subscription == "sink:public/default/audit"
    assert function.subscription == "public/default/audit"  # Pulsar's default, unshared

    named = SinkConfig.build(
        name="audit", inputs=["orders"], sink_type="file", subscription_name="legacy"
    )
    assert sink_function_config(named).subscription == "legacy"


def _fails_once_then_writes_every_message_once(
    spark: Any, sstore: Store, tmp_path: Path, fail_once: str
) -> None:
    """A sink whose ``fail_once`` config makes its first try fail (its marker file records
    it) is restarted by its failure policy and writes every message once."""
    values = [f"m{i}" for i in range(12)]
    _produce(sstore, values, topic="one")
    marker = tmp_path / f"{fail_once}-happened"
    sink = _sink(
        tmp_path, inputs=["one"], max_records_per_batch=5,
        configs={fail_once: str(marker)},
        failure_policy={"backoff_initial": "100ms"},
    )  # fmt: skip
    run = SinkRun(sink, store=sstore, spark=spark).start(until_drained=True)
    run.wait(WAIT)  # raises if the sink ended in ERROR
    status = run.status()
    assert status.state == "STOPPED" and status.num_restarts >= 1, status
    assert marker.exists()
    written = [line["value"] for line in _written(tmp_path)]
    assert Counter(written) == Counter(values)  # every one, once
