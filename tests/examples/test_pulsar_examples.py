"""Functions written for Pulsar run unchanged, with no flag (issue 29, point 2).

``pulsar_funcs/`` holds one function of our own for each function in
Pulsar's ``pulsar-functions/python-examples`` directory, each with the same
``pulsar`` imports and Context calls as its counterpart (named in its
docstring). Every one runs through the harness, on topics typed as sparkfn
creates them by default (``bytes``), where Pulsar's IdentitySerDe rules
apply; several run through :class:`~sparkfn.FunctionRun` on real Spark too,
on topics created with sparkfn's defaults.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sparkfn import Consumer, FunctionConfig, FunctionRun, Producer, Store, TopicAdmin
from sparkfn.api.schemas import AvroSchema
from sparkfn.testing import FunctionHarness
from sparkfn.topics.message import avro_schema

FUNCS = Path(__file__).resolve().parent / "pulsar_funcs"
READING = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "baseValue", "type": ["null", "int"]},
        {"name": "objectValue", "type": ["null", "string"]},
    ],
}


def config(module: str, classname: str | None = None, **fields: Any) -> FunctionConfig:
    """The config a Pulsar user writes for ``pulsar_funcs/<module>.py`` (no
    ``pulsar_compat``: the code says it is Pulsar's); ``in`` -> ``out``."""
    fields.setdefault("name", module.replace("_", "-"))
    fields.setdefault("py", str(FUNCS / f"{module}.py"))
    fields.setdefault("inputs", ["in"])
    fields.setdefault("output", "out")
    fields.setdefault("subscription_position", "earliest")
    return FunctionConfig.build(classname=classname or module, **fields)


def harness(module: str, classname: str | None = None, **fields: Any) -> FunctionHarness:
    """The function on ``bytes`` topics, sparkfn's default topic type; the publishing
    examples' ``copies`` and ``elsewhere`` exist too."""
    return FunctionHarness(
        config(module, classname, **fields),
        input_schema="bytes",
        output_schema="bytes",
        topic_schemas=dict.fromkeys(("copies", "elsewhere"), "bytes"),
    )


# --- every counterpart through the harness --------------------------------------------


@pytest.mark.parametrize(
    ("module", "classname"),
    [
        ("exclaim", "exclaim.Exclaim"),
        ("classic_exclamation", "classic_exclamation.ClassicExclamation"),
        ("native_exclamation", None),
        ("plain_exclamation", None),
    ],
)
def test_exclamations_append_an_exclamation_mark(module: str, classname: str | None) -> None:
    # Text and numbers arrive as Pulsar's IdentitySerDe reads them: "7" is the int 7.
    run = harness(module, classname)
    assert run.send_many([b"hello", "pulsar"]) == [b"hello!", b"pulsar!"]
    assert run.send(b"7") == []  # 7 + "!" is a TypeError, as in Pulsar
    assert (run.stats.received, run.stats.processed_successfully) == (3, 2)
    assert run.stats.user_exceptions == 1
    # Negative-acked, as Pulsar's runtime does: it waits to be delivered again, read back as
    # Pulsar would; no dead letter (maxMessageRetries is unset).
    assert [value for value, _ in run.waiting] == [7] and run.dead_letters == []


def test_a_zip_of_the_exclamation_runs_by_module_and_class(tmp_path: Path) -> None:
    archive = tmp_path / "exclamation.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(FUNCS / "exclaim.py", "exclaim_in_zip.py")
    function = config("exclaim", "exclaim_in_zip.Exclaim", name="zipped", py=str(archive))
    try:
        run = FunctionHarness(function, input_schema="bytes", output_schema="bytes")
        assert run.send(b"zip") == [b"zip!"]
    finally:
        sys.path.remove(str(archive))


def test_config_based_append_takes_its_suffix_from_user_config() -> None:
    assert harness("append_from_config", "append_from_config.AppendFromConfig").send(b"a") == [
        b"a!"
    ]
    configured = harness(
        "append_from_config", "append_from_config.AppendFromConfig", user_config={"suffix": 42}
    )
    assert configured.send(b"a") == [b"a42"]


def test_custom_object_function_reads_and_writes_with_its_serde() -> None:
    run = harness(
        "tally_pair",
        "tally_pair.AddTally",
        input_serde="tally_pair.TallySerDe",
        output_serde="tally_pair.TallySerDe",
    )
    tally = sys.modules["tally_pair"].Tally
    [result] = run.send(tally(3, 4))
    assert (type(result), result.hits, result.misses) == (tally, 4, 6)


def test_log_function_logs_each_input_to_the_log_topic() -> None:
    run = harness("echo_logger", "echo_logger.EchoLogger", log_topic="logs")
    assert run.send_many([b"one", b"two"]) == [b"one!", b"two!"]
    assert run.logs == ["one", "two"]
    assert [m.properties["level"] for m in run.messages if m.kind == "log"] == ["INFO", "INFO"]


def test_logging_function_logs_to_the_log_topic() -> None:
    run = harness("log_and_exclaim", "log_and_exclaim.LogAndExclaim", log_topic="logs")
    assert run.send(b"hi") == [b"hi!"]
    assert run.logs == ["hi-log"]


def test_publish_function_publishes_and_outputs_nothing() -> None:
    run = harness("publish_copy", "publish_copy.PublishCopy")
    assert run.send(b"a") == []
    assert run.published["copies"] == [b"a!"]
    moved = harness(
        "publish_copy", "publish_copy.PublishCopy", user_config={"publish-topic": "elsewhere"}
    )
    moved.send(b"b")
    assert moved.published["persistent://public/default/elsewhere"] == [b"b!"]
    assert "copies" not in moved.published


@pytest.mark.parametrize(
    ("module", "classname"),
    [
        ("publish_with_conf", "publish_with_conf.PublishWithConf"),
        ("typed_publish", "typed_publish.TypedPublish"),
    ],
)
def test_publish_with_message_conf_sets_key_properties_and_time(
    module: str, classname: str
) -> None:
    run = harness(module, classname)
    assert run.send(b"m", key="k1", properties={"origin": "test"}) == []
    [message] = run.messages
    assert (message.kind, message.topic, message.value) == (
        "publish",
        "public/default/copies",
        b"m!",
    )
    assert message.key == "k1"
    assert message.properties == {
        "input_topic": "persistent://public/default/in",
        "origin": "test",
    }
    assert message.event_time is not None


def test_secrets_function_outputs_the_clear_text_secret() -> None:
    run = harness("greet_secret", "greet_secret.GreetSecret", secrets={"username": "alice"})
    assert run.send(b"x") == [b"alice!"]
    unset = harness("greet_secret", "greet_secret.GreetSecret")
    assert unset.send(b"x") == [b"None!"]


def test_thumbnailer_shrinks_binary_input_and_outputs_bytes() -> None:
    image = bytes([4, 2, *range(200, 208)])  # 4 x 2, not UTF-8
    assert harness("shrink_image", "shrink_image.ShrinkImage").send(image) == [
        bytes([2, 1, 200, 202])
    ]


def test_user_exception_is_counted_and_delivered_again_without_end_as_in_pulsar() -> None:
    run = harness("always_fails", "always_fails.AlwaysFails")
    assert run.send(b"doomed") == []
    for redelivered in range(1, 4):
        [(value, properties)] = run.waiting
        assert (value, properties["RECONSUMETIMES"]) == ("doomed", str(redelivered))
        assert run.redeliver() == []
    assert (run.stats.user_exceptions, run.stats.processed_successfully) == (4, 0)
    assert run.dead_letters == []


def test_user_exception_is_counted_and_dead_lettered_after_max_message_retries() -> None:
    run = harness("always_fails", "always_fails.AlwaysFails", max_message_retries=1)
    assert run.send(b"doomed") == []
    assert run.stats.user_exceptions == 2
    assert run.stats.processed_successfully == 0
    [(value, properties)] = run.dead_letters
    assert (value, properties["EXCEPTION"], properties["ATTEMPTS"]) == (
        "doomed",
        "Exception: not today",
        "2",
    )


def test_void_function_outputs_nothing() -> None:
    run = harness("discard", "discard.Discard")
    assert run.send_many([b"a", b"b"]) == []
    assert run.messages == []
    assert run.stats.processed_successfully == 2


def test_wordcount_counts_words_in_state_and_logs_the_counts() -> None:
    run = harness("count_words", "count_words.CountWords", log_topic="logs")
    assert run.send_many([b"apple pie", b"apple"]) == [b"apple pie!", b"apple!"]
    assert run.counters == {"apple": 2, "pie": 1}
    assert run.logs == ["apple seen 1 times", "pie seen 1 times", "apple seen 2 times"]


def test_avro_schema_function_receives_and_returns_records() -> None:
    readings = AvroSchema(None, READING)
    run = FunctionHarness(
        config("bump_reading", "bump_reading.BumpReading", input_serde="bump_reading.Reading"),
        input_schema=readings,
        output_schema=readings,
    )
    assert sys.modules["bump_reading"].Reading.schema() == READING
    assert run.send({"baseValue": 1, "objectValue": "kiln"}) == [
        {"baseValue": 11, "objectValue": "kiln"}
    ]


# --- on real Spark, topics created with sparkfn's defaults -----------------------------


@pytest.fixture
def localrun(sqlite_store: Store, run_until_drained: Any) -> Any:
    """``localrun(config, inputs)``: the function's topics created with sparkfn's defaults,
    ``inputs`` sent, the function run on Spark until they are drained."""

    def run(function: FunctionConfig, inputs: list[Any]) -> FunctionRun:
        admin = TopicAdmin(sqlite_store)
        for topic in [*function.inputs, function.output, function.log_topic]:
            if topic is not None and not admin.exists(topic):
                admin.create(topic)
        producer = Producer(sqlite_store, function.inputs[0])
        for value in inputs:
            producer.send(value, key=f"k-{value!r}")
        finished: FunctionRun = run_until_drained(function, sqlite_store)
        return finished

    return run


def received(store: Store, topic: str) -> list[Any]:
    messages = Consumer(store, topic, initial_position="earliest").receive(max_messages=1000)
    return sorted(messages, key=lambda m: (m.partition, m.offset))


def totals(run: FunctionRun) -> tuple[int, int, int]:
    stats = run.stats()
    return stats.received_total, stats.processed_successfully_total, stats.user_exceptions_total


slow = pytest.mark.slow


@slow
def test_localrun_classic_exclamation_on_default_topics(localrun: Any, sqlite_store: Store) -> None:
    function = config("classic_exclamation", "classic_exclamation.ClassicExclamation")
    run = localrun(function, [b"hello", "pulsar"])
    assert [m.value for m in received(sqlite_store, "out")] == [b"hello!", b"pulsar!"]
    assert totals(run) == (2, 2, 0)


@slow
def test_localrun_native_function_named_by_its_module(localrun: Any, sqlite_store: Store) -> None:
    run = localrun(config("native_exclamation"), [b"a", b"b"])
    assert [m.value for m in received(sqlite_store, "out")] == [b"a!", b"b!"]
    assert totals(run) == (2, 2, 0)


@slow
def test_localrun_publish_with_message_conf(localrun: Any, sqlite_store: Store) -> None:
    TopicAdmin(sqlite_store).create("copies")
    function = config("publish_with_conf", "publish_with_conf.PublishWithConf", output=None)
    run = localrun(function, [b"m"])
    [message] = received(sqlite_store, "copies")
    assert (message.value, message.key) == (b"m!", "k-b'm'")
    assert message.properties == {"input_topic": "persistent://public/default/in"}
    assert message.event_time is not None
    assert totals(run) == (1, 1, 0)


@slow
def test_localrun_secrets_wordcount_and_user_exception(localrun: Any, sqlite_store: Store) -> None:
    secret = config("greet_secret", "greet_secret.GreetSecret", secrets={"username": "alice"})
    run = localrun(secret, [b"x"])
    assert [m.value for m in received(sqlite_store, "out")] == [b"alice!"]
    assert totals(run) == (1, 1, 0)

    words = config(
        "count_words",
        "count_words.CountWords",
        inputs=["lines"],
        output="counted",
        log_topic="logs",
    )
    run = localrun(words, [b"to be", b"be"])
    assert {k: s.counter for k, s in run.state().items()} == {"to": 1, "be": 2}
    assert [m.value for m in received(sqlite_store, "logs")] == [
        b"to seen 1 times",
        b"be seen 1 times",
        b"be seen 2 times",
    ]

    # Pulsar's user_exception: negative-acked, waiting to be delivered again (maxMessageRetries
    # unset: without end); the drain ends and leaves it there, and nothing is dead-lettered.
    failing = config("always_fails", "always_fails.AlwaysFails", inputs=["doomed"], output="never")
    run = localrun(failing, [b"x"])
    assert totals(run) == (1, 0, 1)
    [waiting] = received(sqlite_store, "public/default/always-fails-RETRY")
    assert (waiting.value, waiting.properties["EXCEPTION"]) == (b"x", "Exception: not today")
    assert not TopicAdmin(sqlite_store).exists("public/default/always-fails-DLQ")


@slow
def test_localrun_custom_serde_and_avro_records(localrun: Any, sqlite_store: Store) -> None:
    tally = config(
        "tally_pair",
        "tally_pair.AddTally",
        input_serde="tally_pair.TallySerDe",
        output_serde="tally_pair.TallySerDe",
    )
    run = localrun(tally, [b"1/1"])
    assert [m.value for m in received(sqlite_store, "out")] == [b"2/3"]
    assert totals(run) == (1, 1, 0)

    admin = TopicAdmin(sqlite_store)
    admin.create("readings", schema_type="avro", schema_definition=READING)
    admin.create("bumped", schema_type="avro", schema_definition=READING)
    bump = config(
        "bump_reading",
        "bump_reading.BumpReading",
        inputs=["readings"],
        output="bumped",
        input_serde="bump_reading.Reading",
    )
    run = localrun(bump, [{"baseValue": 5, "objectValue": "kiln"}])
    decode = avro_schema(admin.get("bumped").schema_definition or "").decode
    assert [decode(m.value) for m in received(sqlite_store, "bumped")] == [
        {"baseValue": 15, "objectValue": "kiln"}
    ]
    assert totals(run) == (1, 1, 0)
