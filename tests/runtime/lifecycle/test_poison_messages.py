"""A message that kills its Python worker (issue 28, point 5), on real Spark, both stores.

``funcs/worker_killer.py`` calls ``os._exit(3)`` on input ``exit`` (or on
every input): the batch fails with "Python worker exited unexpectedly
(crashed)". The supervisor splits the failed batch until one message
crashes alone, dead-letters it with its worker's exit code, and goes on
(:mod:`sparkfn.runtime.lifecycle.poison`); a crash on every message still
ends by the failure policy.
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.errors import FunctionFailedError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.rows import (
    DLQ_ATTEMPTS,
    DLQ_EXCEPTION,
    DLQ_ORIGIN_MESSAGE_ID,
    DLQ_REAL_TOPIC,
)
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage
from sparkfn.topics.producer import Producer

KILLER = Path(__file__).resolve().parents[1] / "funcs" / "worker_killer.py"

pytestmark = pytest.mark.slow


def _read(store: Store, topic: str) -> list[ReceivedMessage]:
    if not TopicAdmin(store).exists(topic):
        return []
    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[ReceivedMessage] = []
    while batch := consumer.receive(max_messages=10_000):
        out.extend(batch)
    return out


def _values(store: Store, topic: str) -> collections.Counter[str]:
    return collections.Counter(m.value.decode() for m in _read(store, topic) if m.value)


def _config(**fields: Any) -> FunctionConfig:
    return FunctionConfig.build(
        name=f"killer-{uuid.uuid4().hex[:8]}",  # fresh objects in Spark's reused workers
        py=str(KILLER),
        classname="worker_killer.WorkerKiller",
        inputs=["in"],
        output="out",
        subscription_position="earliest",
        processing_guarantees="effectively_once",
        **fields,
    )


def _setup(store: Store, values: list[str]) -> list[str]:
    admin = TopicAdmin(store)
    admin.create("in", partitions=1, schema_type="string")
    admin.create("out", partitions=1, schema_type="string")
    ids = Producer(store, "in").send_batch(
        [Message(v.encode(), properties={"origin": v}) for v in values]
    )
    return [str(i) for i in ids]


def test_a_message_that_kills_its_worker_is_dead_lettered_and_the_rest_go_on(
    spark: Any, store: Store
) -> None:
    ids = _setup(store, ["a", "exit", "b"])
    config = _config()
    dlq = config.default_dead_letter_topic
    run = FunctionRun(config, store=store, spark=spark)
    try:
        run.start()
        run.wait_for(
            lambda: _values(store, "out") == {"a!": 1, "b!": 1} and _read(store, dlq),
            timeout=180,
            what="a! and b! out and exit dead-lettered",
        )
        # The function kept running: no restart by the policy, no ERROR.
        status = run.status()
        assert status.instances[0].status.state == "RUNNING"
        assert status.instances[0].status.num_restarts == 0
        assert run.run_state == "RUNNING"

        ((letter,),) = [_read(store, dlq)]
        assert letter.value == b"exit"
        cause = f"Python worker exited with code 3 while processing message {ids[1]} of public/default/in"
        assert letter.properties == {
            "origin": "exit",
            DLQ_ORIGIN_MESSAGE_ID: ids[1],
            DLQ_REAL_TOPIC: "persistent://public/default/in",
            DLQ_EXCEPTION: f"PythonWorkerCrashed: {cause}",
            DLQ_ATTEMPTS: letter.properties[DLQ_ATTEMPTS],
        }
        assert int(letter.properties[DLQ_ATTEMPTS]) >= 2  # its batch's crash, then its own

        assert status.instances[0].status.num_system_exceptions == 1
        assert run.stats().instances[0].metrics.system_exceptions_total == 1
        (latest,) = status.instances[0].status.latest_system_exceptions
        assert latest.exception_string == f"PythonWorkerCrashed: {cause}"
        assert latest.message_id == ids[1]

        # More input after it flows as usual.
        Producer(store, "in").send_batch([Message(b"c")])
        run.wait_for(lambda: "c!" in _values(store, "out"), timeout=120, what="c! out")
        assert run.drain(timeout=120)
    finally:
        run.close()
    assert _values(store, "out") == {"a!": 1, "b!": 1, "c!": 1}  # each once
    assert len(_read(store, dlq)) == 1
    assert run.run_state == "STOPPED"


def test_a_function_that_crashes_on_every_message_ends_by_its_failure_policy(
    spark: Any, store: Store
) -> None:
    _setup(store, ["a", "b", "c"])
    config = _config(
        user_config={"every": "yes"},
        failure_policy={"max_restarts": 1, "backoff_initial": 0.1, "restart_window": 600},
    )
    run = FunctionRun(config, store=store, spark=spark)
    try:
        run.start()
        with pytest.raises(FunctionFailedError) as failed:
            run.wait(timeout=240)
        assert run.supervisor is not None and run.supervisor.ended
    finally:
        run.close()
    assert run.run_state == "ERROR"
    causes = [t["cause"] for t in run.transitions() if t["instance"] is None]
    assert any("escalated: more than 1 restarts" in c for c in causes), causes
    # Said in sparkfn's words, with the worker's exit code (issue 39, point 5):
    # what localrun raises (the CLI's line) and what status shows.
    said = f"Python worker exited with code 3 while processing a message of function {config.fqfn}"
    assert said in str(failed.value)
    status = run.status().instances[0].status
    assert status.death_exception is not None
    assert (status.death_exception.type, status.death_exception.message.split(" (")[0]) == (
        "PythonWorkerCrashed",
        said,
    )
    death = status.death_exception
    shown = [str(failed.value), status.error, death.message, death.traceback]
    shown += [t["cause"] for t in run.transitions()]  # each restart's cause too
    for text in shown:
        for name in ("Py4J", "py4j", "collectToPython", "org.apache", "java."):
            assert name not in text, (name, text)
    assert death.traceback == ""  # a worker that died said none; Spark's text is not one
    assert any(said in c for c in causes), causes
    # Nothing was taken for a poison message: nothing processed shows the function can work.
    assert _read(store, config.default_dead_letter_topic) == []
    assert _values(store, "out") == {}
    assert run.stats().instances[0].metrics.system_exceptions_total == 0


def _cursor(store: Store, config: FunctionConfig) -> int:
    topic = TopicAdmin(store).get("in")
    with store.read() as conn:
        return subscription.cursors(conn, config.subscription)[(topic.id, 0)]


def test_a_drains_final_batch_is_hunted_and_drained_means_every_message_done(
    spark: Any, store: Store
) -> None:
    """``--until-drained`` over ``a b exit c d``: the one batch that carries the
    end-of-stream markers crashes; its probes are replays of it that must end
    nothing, so the run ends STOPPED only after c and d (issue 39, point 4)."""
    ids = _setup(store, ["a", "b", "exit", "c", "d"])
    config = _config()
    dlq = config.default_dead_letter_topic
    run = FunctionRun(config, store=store, spark=spark)
    try:
        run.start(until_drained=True)
        assert run.wait(timeout=300)
    finally:
        run.close()
    assert run.run_state == "STOPPED"
    assert _values(store, "out") == {"a!": 1, "b!": 1, "c!": 1, "d!": 1}
    assert _cursor(store, config) == 5  # nothing left before the drain's target
    (letter,) = _read(store, dlq)
    assert letter.value == b"exit"
    assert letter.properties[DLQ_EXCEPTION] == (
        "PythonWorkerCrashed: Python worker exited with code 3 while processing message "
        f"{ids[2]} of public/default/in"
    )
    assert run.stats().instances[0].metrics.system_exceptions_total == 1
