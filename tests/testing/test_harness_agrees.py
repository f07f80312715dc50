"""The harness and a local run on Spark agree on what fails at run time, and how.

A bad classname or secrets provider fails to load alike; a result the output
topic refuses, a publish to a topic that does not exist and a secret that is
not there give the same outputs, dead letters (with the same ``EXCEPTION``)
and counts in the harness as on Spark, for the same config.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.errors import FunctionLoadError, SparkfnError, TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.rows import DLQ_ATTEMPTS, DLQ_EXCEPTION
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.testing import FunctionHarness
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.producer import Producer

MISBEHAVE = """
from sparkfn import Function


class Misbehave(Function):
    def process(self, input, context):
        if input == "dict":
            return {"not": "text"}  # a string topic takes str or bytes
        if input == "publish":
            context.publish("nowhere", input)  # no such topic
        if input == "secret":
            return f"{context.get_secret('absent')}/{context.get_secret('token')}"
        return input + "!"
"""
INPUTS = ["ok", "dict", "publish", "secret"]
# A secret whose reference names an environment variable that is not set.
UNSET = f"env:SPARKFN_TEST_UNSET_{uuid.uuid4().hex.upper()}"


def _config(code: Path, **fields: Any) -> FunctionConfig:
    base: dict[str, Any] = {
        "name": f"misbehave-{uuid.uuid4().hex[:8]}",  # fresh objects in Spark's reused workers
        "py": str(code),
        "classname": "misbehave.Misbehave",
        "inputs": ["in"],
        "output": "out",
        "secrets": {"token": UNSET},
        "max_message_retries": 1,
        "subscription_position": "earliest",
        "auto_create_topics": False,  # a publish to a missing topic fails, alike
    }
    return FunctionConfig.build(**{**base, **fields})


@pytest.fixture
def code(tmp_path: Path) -> Path:
    path = tmp_path / "misbehave.py"
    path.write_text(MISBEHAVE)
    return path


def _topics(store: Store) -> None:
    admin = TopicAdmin(store)
    for topic in ("in", "out"):
        admin.create(topic, schema_type="string")


@pytest.mark.parametrize(
    "fields",
    [
        {"classname": "misbehave.Missing"},
        {"classname": "no_such_module.Thing"},
        {"secrets_provider_classname": "no_such_module.Provider"},
        {"secrets_provider_classname": "Nonsense"},
    ],
    ids=["class", "module", "provider-module", "provider-name"],
)
def test_what_cannot_load_fails_alike(
    code: Path, sqlite_store: Store, fields: dict[str, Any]
) -> None:
    _topics(sqlite_store)
    config = _config(code, **fields)
    with pytest.raises(FunctionLoadError) as in_harness:
        FunctionHarness(config, input_schema="string", output_schema="string")
    # FunctionRun checks the code before it starts Spark: no JVM here.
    with pytest.raises(SparkfnError) as on_spark:
        FunctionRun(config, store=sqlite_store).start(until_drained=True)
    assert type(on_spark.value) is type(in_harness.value)
    assert str(on_spark.value) == str(in_harness.value)
    assert on_spark.value.reason == in_harness.value.reason == "function_load_error"


def test_a_publish_to_a_missing_topic_fails_the_message_in_the_harness_too(code: Path) -> None:
    harness = FunctionHarness(_config(code), input_schema="string", output_schema="string")
    assert harness.send("publish") == []
    [(value, properties)] = harness.dead_letters
    assert value == "publish"
    assert properties[DLQ_EXCEPTION].startswith(
        f"{TopicNotFoundError.__name__}: function {harness.config.fqfn}: publish to topic "
        "public/default/nowhere, which does not exist"
    )
    created = FunctionHarness(
        _config(code, auto_create_topics=True), input_schema="string", output_schema="string"
    )
    assert created.send("publish") == ["publish!"]
    assert created.published["nowhere"] == [b"publish"]  # created as bytes, as on Spark


def _harness_outcome(config: FunctionConfig) -> dict[str, Any]:
    harness = FunctionHarness(config, input_schema="string", output_schema="string")
    outputs = [value for value in INPUTS for value in harness.send(value)]
    stats = harness.stats
    return {
        "outputs": outputs,
        "dead": sorted(
            (value, p[DLQ_EXCEPTION], p[DLQ_ATTEMPTS]) for value, p in harness.dead_letters
        ),
        "counts": (stats.received, stats.processed_successfully, stats.user_exceptions),
    }


def _spark_outcome(config: FunctionConfig, store: Store, run_until_drained: Any) -> dict[str, Any]:
    _topics(store)
    producer = Producer(store, "in")
    for value in INPUTS:
        producer.send(value)
    run = run_until_drained(config, store)
    dead = Consumer(store, config.default_dead_letter_topic, initial_position="earliest")
    stats = run.stats()
    return {
        "outputs": [
            m.value.decode() for m in _all(Consumer(store, "out", initial_position="earliest"))
        ],
        "dead": sorted(
            (m.value.decode(), m.properties[DLQ_EXCEPTION], m.properties[DLQ_ATTEMPTS])
            for m in _all(dead)
        ),
        "counts": (
            stats.received_total,
            stats.processed_successfully_total,
            stats.user_exceptions_total,
        ),
    }


def _all(consumer: Consumer) -> list[Any]:
    return list(consumer.receive(max_messages=1000))


@pytest.mark.slow
@pytest.mark.long_running(30)
def test_run_time_failures_are_the_same_in_the_harness_and_on_spark(
    code: Path, sqlite_store: Store, run_until_drained: Any
) -> None:
    config = _config(code)
    in_harness = _harness_outcome(config)
    on_spark = _spark_outcome(config, sqlite_store, run_until_drained)
    assert on_spark == in_harness
    fqfn = config.fqfn
    assert in_harness["outputs"] == ["ok!", "None/None"]
    assert in_harness["dead"] == [
        (
            "dict",
            f"TypeError: function {fqfn} returned a dict ({{'not': 'text'}}) for topic "
            "public/default/out (schema string); expected str or bytes",
            "2",
        ),
        (
            "publish",
            f"TopicNotFoundError: function {fqfn}: publish to topic public/default/nowhere, "
            "which does not exist; create it first (topics are not created on first use here)",
            "2",
        ),
    ]
    assert in_harness["counts"] == (6, 2, 4)  # 4 messages, 2 of them delivered again
