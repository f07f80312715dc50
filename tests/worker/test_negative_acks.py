"""A failing message is negative-acked and delivered again later, as Pulsar does (issue 38, point 1).

Typed as a Pulsar user types it: a function created from a Pulsar function
YAML (``maxMessageRetries``, ``deadLetterTopic``, ``negativeAckRedeliveryDelayMs``,
persistent:// names) and a sink from ``pulsar-admin sinks create``'s flags
(``--max-redeliver-count``, ``--negative-ack-redelivery-delay-ms``). A
message whose call raised waits in the function's retry topic while the
messages behind it go on; it is delivered again after the delay, as the
original (topic, message id, key, properties), even across a worker's
restart; after ``maxMessageRetries`` redeliveries it goes to the
dead-letter topic with its cause and ``ATTEMPTS``. The delays are small so
the tests are quick; each check of a delay is a lower bound.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_admin_cli import Sparkfn
from worker_process import SharedWorker, WorkerProcess

from sparkfn.runtime.function.rows import (
    DLQ_ATTEMPTS,
    DLQ_EXCEPTION,
    DLQ_ORIGIN_MESSAGE_ID,
    DLQ_REAL_TOPIC,
)
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage
from sparkfn.topics.producer import Producer
from waiting import until

pytestmark = pytest.mark.slow

FUNCS = Path(__file__).resolve().parent / "funcs"


def _read(store: Store, topic: str) -> list[ReceivedMessage]:
    if not TopicAdmin(store).exists(topic):
        return []
    return list(Consumer(store, topic, initial_position="earliest").receive(1000))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _function_yaml(tmp: Path, name: str, delay_ms: int, retries: int | None) -> Path:
    """Pulsar's function YAML; ``retries`` None: neither ``maxMessageRetries`` nor
    ``deadLetterTopic`` (Pulsar's default: delivered again without end)."""
    config = tmp / f"{name}.yaml"
    dead = (
        ""
        if retries is None
        else f"maxMessageRetries: {retries}\n"
        f"deadLetterTopic: persistent://public/default/{name}-dead\n"
    )
    config.write_text(
        f"tenant: public\n"
        f"namespace: default\n"
        f"name: {name}\n"
        f"py: {FUNCS / 'flaky_db.py'}\n"
        f"className: flaky_db.FlakyDb\n"
        f"inputs: [persistent://public/default/{name}-in]\n"
        f"output: persistent://public/default/{name}-out\n"
        f"{dead}"
        f"negativeAckRedeliveryDelayMs: {delay_ms}\n"
        f"subscriptionPosition: Earliest\n"
        f"userConfig:\n"
        f"  log: {tmp / f'{name}.log'}\n"
        f"  down: {tmp / f'{name}.down'}\n"
    )
    return config


def _produce(store: Store, topic: str, values: list[str]) -> list[str]:
    TopicAdmin(store).create(topic)
    sent = [Message(v.encode(), key=f"k-{v}", properties={"origin": "web"}) for v in values]
    return [str(i) for i in Producer(store, topic).send_batch(sent)]


def test_a_failed_message_waits_its_delay_without_holding_back_the_rest_and_survives_a_restart(
    worker_process: WorkerProcess, store: Store, tmp_path: Path
) -> None:
    name = "orders"
    delay = 3000
    down = tmp_path / f"{name}.down"
    down.touch()  # the database is down
    ids = _produce(store, f"{name}-in", ["db-1", "plain-2", "plain-3"])
    cli = Sparkfn(worker_process.url, worker_process.data_dir)
    cli.ok(
        "functions",
        "create",
        "--function-config-file",
        str(_function_yaml(tmp_path, name, delay, 3)),
    )
    log = tmp_path / f"{name}.log"

    def outputs() -> dict[str, dict[str, Any]]:
        return {o["value"]: o for o in (json.loads(m.value) for m in _read(store, f"{name}-out"))}

    # The messages behind the failed one go on; the failed one waits in the retry topic.
    until(
        lambda: {"plain-2", "plain-3"} <= set(outputs()),
        lambda: f"outputs {sorted(outputs())}; log {_lines(log)}",
        180,
    )
    assert "db-1" not in outputs()
    [first] = [line for line in _lines(log) if line["value"] == "db-1"]
    assert first["redeliveries"] == 0
    waiting = _read(store, f"public/default/{name}-RETRY")
    assert [m.value for m in waiting] == [b"db-1"]

    # The worker restarts while it waits; the database comes back meanwhile.
    worker_process.stop()
    down.unlink()
    again = WorkerProcess(worker_process.data_dir, worker_process.store_url).start()
    try:
        again.wait_ready()
        until(
            lambda: "db-1" in outputs(),
            lambda: f"outputs {sorted(outputs())}; log {_lines(log)}\n{again.output()[-3000:]}",
            180,
        )
    finally:
        again.stop()
    # Delivered again as the original: Pulsar's topic name, its message id, key, properties.
    redelivered = outputs()["db-1"]
    assert redelivered["topic"] == f"persistent://public/default/{name}-in"
    assert redelivered["id"] == ids[0]
    assert redelivered["key"] == "k-db-1"
    assert redelivered["properties"] == {"origin": "web"}
    assert redelivered["redeliveries"] == 1
    assert redelivered["t"] >= first["t"] + delay / 1000  # not before its delay
    values = [json.loads(m.value)["value"] for m in _read(store, f"{name}-out")]
    assert sorted(values) == ["db-1", "plain-2", "plain-3"]  # each once
    assert _read(store, f"{name}-dead") == []


def test_a_message_failing_every_delivery_is_dead_lettered_with_its_cause(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    store = shared_worker.store
    name = "parser"
    delay = 400
    ids = _produce(store, f"{name}-in", ["poison", "fine"])
    cli = Sparkfn(shared_worker.url, shared_worker.data_dir)
    cli.ok(
        "functions",
        "create",
        "--function-config-file",
        str(_function_yaml(tmp_path, name, delay, 2)),
    )

    until(
        lambda: len(_read(store, f"{name}-dead")) == 1,
        lambda: f"log {_lines(tmp_path / f'{name}.log')}",
        180,
    )
    [dead] = _read(store, f"{name}-dead")
    assert dead.value == b"poison" and dead.key == "k-poison"
    assert dead.properties == {
        "origin": "web",
        DLQ_EXCEPTION: "ValueError: cannot parse poison",
        DLQ_ORIGIN_MESSAGE_ID: ids[0],
        DLQ_REAL_TOPIC: f"persistent://public/default/{name}-in",
        DLQ_ATTEMPTS: "3",  # the delivery and maxMessageRetries redeliveries
    }
    deliveries = [line for line in _lines(tmp_path / f"{name}.log") if line["value"] == "poison"]
    assert [d["redeliveries"] for d in deliveries] == [0, 1, 2]
    assert {d["id"] for d in deliveries} == {ids[0]}
    for earlier, later in zip(deliveries, deliveries[1:], strict=False):
        assert later["t"] >= earlier["t"] + delay / 1000
    assert [json.loads(m.value)["value"] for m in _read(store, f"{name}-out")] == ["fine"]
    stats = cli.json(
        "functions", "stats", "--tenant", "public", "--namespace", "default", "--name", name
    )
    assert stats["userExceptionsTotal"] == 3
    assert stats["receivedTotal"] == 4  # Pulsar counts every delivery
    # Its waiting messages are its subscription's: they go with it, as Pulsar's do.
    cli.ok("functions", "delete", "--tenant", "public", "--namespace", "default", "--name", name)
    assert not TopicAdmin(store).exists(f"public/default/{name}-RETRY")


def test_a_sink_failing_on_a_message_gets_it_again_after_the_delay_then_dead_letters_it(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    store = shared_worker.store
    # Longer than the shared worker's 3 s of quiet before it parks a sink's query: a
    # redelivery waiting for its time keeps the query running (nothing would wake it).
    delay = 3500
    down = tmp_path / "down"
    down.touch()
    log = tmp_path / "sink.log"
    ids = _produce(store, "rows-in", ["db-1", "poison", "ok-2"])
    cli = Sparkfn(shared_worker.url, shared_worker.data_dir)
    cli.ok(
        "sinks", "create", "--tenant", "public", "--namespace", "default", "--name", "rows",
        "--archive", str(FUNCS / "flaky_sink.py"), "--classname", "flaky_sink.FlakySink",
        "--inputs", "persistent://public/default/rows-in", "--subs-position", "Earliest",
        "--max-redeliver-count", "1", "--negative-ack-redelivery-delay-ms", str(delay),
        "--sink-config", json.dumps({"log": str(log), "down": str(down)}),
    )  # fmt: skip

    def written() -> list[str]:
        return [line["value"] for line in _lines(log) if line["ok"]]

    until(lambda: "ok-2" in written(), lambda: f"log {_lines(log)}", 180)
    down.unlink()  # the database is back: the next delivery of db-1 is written
    until(
        lambda: "db-1" in written() and len(_read(store, "rows-DLQ")) == 1,
        lambda: f"log {_lines(log)}",
        180,
    )
    assert sorted(written()) == ["db-1", "ok-2"]
    [dead] = _read(store, "rows-DLQ")
    assert dead.value == b"poison"
    assert dead.properties[DLQ_EXCEPTION] == "ValueError: cannot write poison"
    assert dead.properties[DLQ_ATTEMPTS] == "2"
    assert dead.properties[DLQ_ORIGIN_MESSAGE_ID] == ids[1]
    calls = [line for line in _lines(log) if line["value"] == "db-1"]
    assert {c["message_id"] for c in calls} == {ids[0]}  # the original's id every time
    assert {c["topic"] for c in calls} == {"public/default/rows-in"}
    assert calls[1]["t"] >= calls[0]["t"] + delay / 1000


def test_unset_retries_redeliver_without_end_as_pulsar_and_a_drain_keeps_what_waits(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    """Pulsar's default (no ``maxMessageRetries``): a message failing twice then succeeding is
    processed, one that always fails keeps coming back with a growing redelivery count and
    never reaches a dead-letter topic, and the messages behind them go on. A drain ends
    all the same; what waits in the retry topic survives it and comes back on start."""
    store = shared_worker.store
    name = "ledger"
    delay = 500
    down = tmp_path / f"{name}.down"
    down.touch()  # the database is down
    log = tmp_path / f"{name}.log"
    ids = _produce(store, f"{name}-in", ["db-1", "poison", "plain-2"])
    cli = Sparkfn(shared_worker.url, shared_worker.data_dir)
    cli.ok(
        "functions", "create", "--function-config-file",
        str(_function_yaml(tmp_path, name, delay, None)),
    )  # fmt: skip
    one = ("--tenant", "public", "--namespace", "default", "--name", name)

    def outputs() -> dict[str, dict[str, Any]]:
        return {o["value"]: o for o in (json.loads(m.value) for m in _read(store, f"{name}-out"))}

    def deliveries(value: str) -> list[dict[str, Any]]:
        return [line for line in _lines(log) if line["value"] == value]

    until(lambda: "plain-2" in outputs(), lambda: f"log {_lines(log)}", 180)
    until(lambda: len(deliveries("db-1")) >= 2, lambda: f"log {_lines(log)}", 180)
    down.unlink()  # the database is back after two failed deliveries
    until(lambda: "db-1" in outputs(), lambda: f"log {_lines(log)}", 180)
    assert outputs()["db-1"]["redeliveries"] >= 2 and outputs()["db-1"]["id"] == ids[0]
    until(lambda: len(deliveries("poison")) >= 4, lambda: f"log {_lines(log)}", 180)
    counts = [d["redeliveries"] for d in deliveries("poison")]
    assert counts == list(range(len(counts)))  # each delivery counted, none skipped
    assert {d["id"] for d in deliveries("poison")} == {ids[1]}
    for earlier, later in zip(deliveries("poison"), deliveries("poison")[1:], strict=False):
        assert later["t"] >= earlier["t"] + delay / 1000
    assert not TopicAdmin(store).exists(f"public/default/{name}-DLQ")
    stats = cli.json("functions", "stats", *one)
    assert stats["userExceptionsTotal"] >= 2 + 4 - 1

    # A drain ends although poison never succeeds; it waits in the retry topic meanwhile.
    cli.ok("functions", "drain", *one)
    before = len(deliveries("poison"))
    waiting = [m for m in _read(store, f"public/default/{name}-RETRY") if m.value == b"poison"]
    assert waiting, "the waiting message is kept in the retry topic"
    cli.ok("functions", "start", *one)
    until(lambda: len(deliveries("poison")) > before + 1, lambda: f"log {_lines(log)}", 180)
    counts = [d["redeliveries"] for d in deliveries("poison")]
    assert counts == list(range(len(counts)))  # it came back where it was, counted on
    values = [json.loads(m.value)["value"] for m in _read(store, f"{name}-out")]
    assert sorted(values) == ["db-1", "plain-2"]  # each once
    assert not TopicAdmin(store).exists(f"public/default/{name}-DLQ")
    cli.ok("functions", "delete", *one)


def test_a_sink_without_max_redeliver_count_gets_a_failing_message_again_without_end(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    """``pulsar-admin sinks create`` without ``--max-redeliver-count``: Pulsar's default, a
    failed write is delivered again after the delay without end, and the sink goes on."""
    store = shared_worker.store
    delay = 500
    down = tmp_path / "down"
    down.touch()
    log = tmp_path / "sink.log"
    ids = _produce(store, "ledger-rows-in", ["db-1", "poison", "ok-2"])
    cli = Sparkfn(shared_worker.url, shared_worker.data_dir)
    cli.ok(
        "sinks", "create", "--tenant", "public", "--namespace", "default", "--name", "ledger-rows",
        "--archive", str(FUNCS / "flaky_sink.py"), "--classname", "flaky_sink.FlakySink",
        "--inputs", "persistent://public/default/ledger-rows-in", "--subs-position", "Earliest",
        "--negative-ack-redelivery-delay-ms", str(delay),
        "--sink-config", json.dumps({"log": str(log), "down": str(down)}),
    )  # fmt: skip

    def calls(value: str) -> list[dict[str, Any]]:
        return [line for line in _lines(log) if line["value"] == value]

    until(lambda: any(c["ok"] for c in calls("ok-2")), lambda: f"log {_lines(log)}", 180)
    until(lambda: len(calls("db-1")) >= 2, lambda: f"log {_lines(log)}", 180)
    down.unlink()
    until(lambda: any(c["ok"] for c in calls("db-1")), lambda: f"log {_lines(log)}", 180)
    until(lambda: len(calls("poison")) >= 4, lambda: f"log {_lines(log)}", 180)
    assert {c["message_id"] for c in calls("poison")} == {ids[1]}
    assert [c["value"] for c in _lines(log) if c["ok"]].count("db-1") == 1
    assert not TopicAdmin(store).exists("public/default/ledger-rows-DLQ")
    cli.ok(
        "sinks", "delete", "--tenant", "public", "--namespace", "default", "--name", "ledger-rows"
    )


def test_an_explicit_zero_is_unset_by_an_update_with_pulsars_minus_one(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    """What docs/pulsar-migration.md's upgrade notes tell the owner of a function or sink
    stored with ``max_message_retries: 0`` (every one registered before unset became the
    default): ``update --max-message-retries -1`` (a sink's ``--max-redeliver-count -1``)
    gives it Pulsar's default; an update that does not name it keeps the 0."""
    cli = Sparkfn(shared_worker.url, shared_worker.data_dir)
    one = ("--tenant", "public", "--namespace", "default", "--name", "old-fn")
    cli.ok(
        "functions", "create", *one, "--py", str(FUNCS / "flaky_db.py"),
        "--classname", "flaky_db.FlakyDb", "--inputs", "persistent://public/default/old-in",
        "--max-message-retries", "0",
    )  # fmt: skip
    _zero_kept_until_minus_one(cli, "functions", one, "--max-message-retries")

    sink = ("--tenant", "public", "--namespace", "default", "--name", "old-sink")
    cli.ok(
        "sinks", "create", *sink, "--archive", str(FUNCS / "flaky_sink.py"),
        "--classname", "flaky_sink.FlakySink", "--inputs", "persistent://public/default/old-in",
        "--max-redeliver-count", "0",
        "--sink-config", json.dumps({"log": str(tmp_path / "log"), "down": str(tmp_path / "d")}),
    )  # fmt: skip
    _zero_kept_until_minus_one(cli, "sinks", sink, "--max-redeliver-count")


def _zero_kept_until_minus_one(cli: Sparkfn, kind: str, name: tuple[str, ...], flag: str) -> None:
    """A stored 0 stays through an update that does not name it; ``flag -1`` unsets it."""
    assert cli.json(kind, "get", *name)["maxMessageRetries"] == 0
    cli.ok(kind, "update", *name, "--parallelism", "2")
    assert cli.json(kind, "get", *name)["maxMessageRetries"] == 0  # kept
    cli.ok(kind, "update", *name, flag, "-1")
    assert cli.json(kind, "get", *name).get("maxMessageRetries") is None
