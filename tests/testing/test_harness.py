"""sparkfn.testing.FunctionHarness: every function form, Pulsar's message rules, no Spark."""

from __future__ import annotations

import sys
import types
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sparkfn import (
    ConfigError,
    Context,
    Function,
    FunctionConfig,
    FunctionLoadError,
    PayloadError,
    VectorizedFunction,
    vectorized,
)
from sparkfn.testing import FunctionHarness, HarnessClosedError, HarnessState

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# --- the forms ---------------------------------------------------------------------


class Exclaim(Function):
    def process(self, input: str, context: Context) -> str:
        return input + "!"


class UpperBatch(VectorizedFunction):
    def process_batch(self, batch: pa.RecordBatch, context: Context) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [batch.column("key"), pc.utf8_upper(batch.column("value"))], names=["key", "value"]
        )


@vectorized(batch_format="pandas")
def upper_frame(df: pd.DataFrame) -> pd.DataFrame:
    return df[["key"]].assign(value=df["value"].str.upper())


def plain(input: str) -> str:
    return input + "!"


def plain_with_context(input: str, context: Context) -> str:
    return f"{input}@{context.get_message_id()}"


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (plain, ["a!", "b!"]),
        (plain_with_context, ["a@0:0", "b@0:1"]),
        (lambda text: text * 2, ["aa", "bb"]),
        (Exclaim, ["a!", "b!"]),
        (Exclaim(), ["a!", "b!"]),
        (UpperBatch, ["A", "B"]),
        (UpperBatch(), ["A", "B"]),
        (upper_frame, ["A", "B"]),
    ],
    ids=[
        "plain",
        "plain-context",
        "lambda",
        "class",
        "instance",
        "vectorized-arrow",
        "vectorized-arrow-instance",
        "vectorized-pandas",
    ],
)
def test_every_form_produces_its_outputs(target: Any, expected: list[str]) -> None:
    harness = FunctionHarness(target)
    assert harness.send("a") == expected[:1]
    assert harness.send("b") == expected[1:]
    assert harness.outputs == expected
    assert harness.published["out"] == expected
    assert harness.stats.received == 2
    assert harness.stats.processed_successfully == 2


def test_a_module_defining_process_is_a_function() -> None:
    module = types.ModuleType("shout")
    exec("def process(input):\n    return input.upper()\n", module.__dict__)
    assert FunctionHarness(module).send("hey") == ["HEY"]


def test_a_function_config_is_loaded_like_the_runtime_does() -> None:
    config = FunctionConfig.build(
        name="wc",
        py=str(EXAMPLES / "wordcount.py"),
        classname="wordcount.WordCount",
        inputs=["sentences"],
        output="echo",
    )
    harness = FunctionHarness(config)
    assert harness.send_many(["apple pie", "apple"]) == ["apple pie", "apple"]
    assert harness.published["public/default/echo"] == ["apple pie", "apple"]
    assert harness.counters == {"apple": 2, "pie": 1}


def test_a_pulsar_function_runs_with_pulsar_compat() -> None:
    config = FunctionConfig.build(
        name="pulsar",
        py=str(EXAMPLES / "pulsar_exclamation.py"),
        classname="pulsar_exclamation.ExclamationFunction",
        inputs=["in"],
        output="out",
        pulsar_compat=True,
    )
    harness = FunctionHarness(config)
    assert harness.send("hi") == ["hi!"]
    assert harness.counters == {"seen": 1}


def test_a_function_config_takes_no_competing_keywords() -> None:
    config = FunctionConfig.build(name="x", classname="json.dumps", inputs=["in"], output="out")
    with pytest.raises(ConfigError, match="set output, max_message_retries in the config"):
        FunctionHarness(config, output="other", max_message_retries=2)


def test_wrong_shapes_fail_with_the_function_named() -> None:
    with pytest.raises(FunctionLoadError, match=r"public/default/test: 'f' must take \(input\)"):
        FunctionHarness(lambda_three_args)
    with pytest.raises(FunctionLoadError, match="has no process"):
        FunctionHarness(object())
    with pytest.raises(ConfigError, match="instance_id must be in 0..1"):
        FunctionHarness(plain, parallelism=2, instance_id=2)


def lambda_three_args(a: Any, b: Any, c: Any) -> None:
    return None


lambda_three_args.__name__ = "f"


# --- messages in and out ------------------------------------------------------------


def test_the_context_describes_the_message_and_the_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", "t0ken")
    seen: dict[str, Any] = {}

    def spy(input: str, context: Context) -> None:
        seen.update(
            id=str(context.get_message_id()),
            key=context.get_message_key(),
            partition_key=context.get_partition_key(),
            event_time=context.get_message_eventtime(),
            properties=context.get_message_properties(),
            topic=context.get_current_message_topic_name(),
            name=context.get_function_name(),
            fqfn=context.get_function_id(),
            instance=(context.get_instance_id(), context.get_num_instances()),
            inputs=context.get_input_topics(),
            output=context.get_output_topic(),
            color=context.get_user_config_value("color"),
            config=dict(context.get_user_config_map()),
            token=context.get_secret("token"),
            missing=context.get_secret("missing"),
        )

    harness = FunctionHarness(
        spy,
        name="spy",
        inputs=["a", "b"],
        user_config={"color": "red"},
        secrets={"token": "env:HARNESS_TOKEN"},
        parallelism=3,
        instance_id=2,
    )
    harness.send("x")
    # No key, no event time: Pulsar's client gives "" and 0.
    assert (seen["key"], seen["partition_key"], seen["event_time"]) == ("", "", 0)
    harness.send(
        "y", key="k", properties={"p": "1"}, event_time=1_700_000_000_123, topic="persistent://b"
    )
    assert seen == {
        "id": "0:0",
        "key": "k",
        "partition_key": "k",
        "event_time": 1_700_000_000_123,
        "properties": {"p": "1"},
        "topic": "persistent://public/default/b",
        "name": "spy",
        "fqfn": str(uuid.uuid5(uuid.NAMESPACE_URL, "sparkfn:function:public/default/spy")),
        "instance": (2, 3),
        "inputs": ["persistent://public/default/a", "persistent://public/default/b"],
        "output": "persistent://public/default/out",
        "color": "red",
        "config": {"color": "red"},
        "token": "t0ken",
        "missing": None,
    }
    assert harness.outputs == []


def test_datetime_event_times_are_accepted() -> None:
    harness = FunctionHarness(lambda _, ctx: str(ctx.get_message_eventtime()))
    moment = datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)
    assert harness.send("x", event_time=moment) == [str(int(moment.timestamp() * 1000))]


def test_outputs_keep_the_input_key_and_values_follow_topic_schemas() -> None:
    def double(order: dict[str, Any]) -> dict[str, Any]:
        return {**order, "qty": order["qty"] * 2}

    harness = FunctionHarness(double, input_schema="json", output_schema="json")
    assert harness.send({"id": 1, "qty": 2}, key="alice") == [{"id": 1, "qty": 4}]
    [message] = harness.messages
    assert (message.kind, message.topic, message.key) == ("output", "public/default/out", "alice")
    with pytest.raises(PayloadError, match="not JSON-serialisable"):
        harness.send({1, 2})


def test_bytes_topics_pass_bytes_and_bad_values_are_rejected() -> None:
    harness = FunctionHarness(lambda data: data[::-1], input_schema="bytes", output_schema="bytes")
    assert harness.send(b"\x00\x01") == [b"\x01\x00"]
    strict = FunctionHarness(plain)
    with pytest.raises(PayloadError, match="value must be str or bytes"):
        strict.send(42)
    with pytest.raises(ConfigError, match="not one of its inputs"):
        strict.send("x", topic="elsewhere")


def test_publish_goes_to_any_topic_with_its_schema() -> None:
    def fan_out(input: str, context: Context) -> str:
        context.publish("copies", input, properties={"copy": "1"})
        context.publish(
            "tenant/ns/counts", {"len": len(input)}, message_conf={"partition_key": "p"}
        )
        return input

    harness = FunctionHarness(
        fan_out, topic_schemas={"copies": "string", "tenant/ns/counts": "json"}
    )
    assert harness.send("abc") == ["abc"]
    assert harness.published["copies"] == ["abc"]
    assert harness.published["persistent://tenant/ns/counts"] == [{"len": 3}]
    assert "counts" not in harness.published  # public/default/counts is another topic
    assert set(harness.published) == {
        "public/default/out",
        "public/default/copies",
        "tenant/ns/counts",
    }
    by_topic = {m.topic: m for m in harness.messages}
    assert by_topic["public/default/copies"].properties == {"copy": "1"}
    assert by_topic["tenant/ns/counts"].key == "p"


def test_a_function_without_output_only_publishes() -> None:
    harness = FunctionHarness(plain, output=None)
    assert harness.send("x") == []
    assert harness.outputs == []
    assert dict(harness.published) == {}


# --- state --------------------------------------------------------------------------


class Remember(Function):
    """Counts messages and remembers the previous one; returns what it read back."""

    def process(self, input: str, context: Context) -> str:
        previous = context.get_state("last")
        context.put_state("last", input)
        context.incr_counter("n", 1)
        read_back = context.get_state("last")
        count = context.get_counter("n")
        return f"{input}:{previous!r}:{read_back!r}:{count}"


def test_state_reads_its_own_writes_within_and_across_batches() -> None:
    harness = FunctionHarness(Remember)
    assert harness.send_many(["a", "b"]) == ["a:None:b'a':1", "b:b'a':b'b':2"]
    assert harness.send("c") == ["c:b'b':b'c':3"]
    assert harness.state == {"last": b"c"}
    assert harness.counters == {"n": 3}
    assert (harness.get_state("last"), harness.get_counter("n")) == (b"c", 3)


def test_deletes_and_operator_writes() -> None:
    def reset(input: str, context: Context) -> str:
        if input == "reset":
            context.del_counter("n")
            context.del_state("note")
        else:
            context.incr_counter("n", 5)
            context.put_state("note", input)
        return f"{context.get_counter('n')}:{context.get_state('note')!r}"

    harness = FunctionHarness(reset)
    harness.put_state("n", counter=10)
    assert harness.send("x") == ["15:b'x'"]
    assert harness.send_many(["reset", "y"]) == ["0:None", "5:b'y'"]
    assert (harness.counters, harness.state) == ({"n": 5}, {"note": b"y"})
    harness.put_state("note", "operator")
    assert harness.state == {"note": b"operator"}
    harness.put_state("note")
    assert harness.state == {}


# --- failures -----------------------------------------------------------------------


SIDE = {"side": "string"}  # the topic Flaky publishes to


class Flaky(Function):
    """Emits, publishes, counts and records a metric, then fails on "bad" input."""

    def __init__(self, failures_before_success: int | None = None) -> None:
        self.failures_before_success = failures_before_success
        self.calls: list[str] = []

    def process(self, input: str, context: Context) -> str:
        self.calls.append(input)
        context.publish("side", f"side-{input}")
        context.incr_counter("seen", 1)
        context.put_state("last", input)
        context.record_metric("size", len(input))
        context.get_logger().info("handling %s", input)
        if input == "bad":
            limit = self.failures_before_success
            if limit is None or self.calls.count("bad") <= limit:
                msg = f"cannot handle {input!r}"
                raise ValueError(msg)
        return input.upper()


def test_a_failed_message_leaves_no_trace_and_is_dead_lettered_after_retries() -> None:
    flaky = Flaky()
    harness = FunctionHarness(
        flaky, dead_letter_topic="dlq", max_message_retries=2, log_topic="logs", topic_schemas=SIDE
    )
    assert harness.send("ok") == ["OK"]
    assert harness.send("bad", key="k", properties={"origin": "test"}) == []
    assert harness.send("fine") == ["FINE"]

    assert flaky.calls == ["ok", "bad", "bad", "bad", "fine"]  # 1 + max_message_retries
    assert harness.outputs == ["OK", "FINE"]
    assert harness.published["side"] == ["side-ok", "side-fine"]
    assert harness.counters == {"seen": 2}
    assert harness.state == {"last": b"fine"}
    assert harness.metrics["size"].count == 2
    assert harness.metrics["size"].sum == 6

    [(value, properties)] = harness.dead_letters
    assert value == "bad"
    assert properties == {
        "origin": "test",
        "ORIGIN_MESSAGE_ID": "0:1",
        "REAL_TOPIC": "persistent://public/default/in",
        "EXCEPTION": "ValueError: cannot handle 'bad'",
        "ATTEMPTS": "3",
    }
    [dead] = [m for m in harness.messages if m.kind == "dead_letter"]
    assert (dead.topic, dead.key) == ("public/default/dlq", "k")

    stats = harness.stats
    # Each delivery is received (Pulsar's count): "bad" was negative-acked and redelivered twice.
    assert (stats.received, stats.processed_successfully) == (5, 2)
    assert (stats.user_exceptions, stats.dead_lettered, stats.system_exceptions) == (3, 1, 0)
    assert [e.message for e in stats.latest_exceptions] == ["cannot handle 'bad'"] * 3
    assert {e.message_id for e in stats.latest_exceptions} == {"0:1"}
    # Logs are not rolled back: they describe the attempts, failed ones included.
    assert harness.logs == [
        "handling ok",
        "handling bad",
        "handling bad",
        "handling bad",
        "handling fine",
    ]


def test_a_retry_that_succeeds_counts_once() -> None:
    flaky = Flaky(failures_before_success=1)
    harness = FunctionHarness(
        flaky, dead_letter_topic="dlq", max_message_retries=3, topic_schemas=SIDE
    )
    assert harness.send("bad") == ["BAD"]
    assert flaky.calls == ["bad", "bad"]
    assert harness.published["side"] == ["side-bad"]
    assert harness.counters == {"seen": 1}
    assert harness.metrics["size"].count == 1
    assert harness.dead_letters == []
    assert (harness.stats.user_exceptions, harness.stats.processed_successfully) == (1, 1)


def test_without_a_dead_letter_topic_a_failed_message_goes_to_the_default_one() -> None:
    harness = FunctionHarness(Flaky(), max_message_retries=0, topic_schemas=SIDE)
    assert harness.send_many(["bad", "ok"]) == ["OK"]
    assert [value for value, _ in harness.dead_letters] == ["bad"]
    assert [m.topic for m in harness.messages if m.kind == "dead_letter"] == [
        "public/default/test-DLQ"
    ]
    assert (harness.stats.user_exceptions, harness.stats.dead_lettered) == (1, 1)


def test_a_failed_message_is_dropped_only_when_asked() -> None:
    flaky = Flaky()
    harness = FunctionHarness(
        flaky, drop_failed_messages=True, max_message_retries=0, topic_schemas=SIDE
    )
    assert harness.send_many(["bad", "ok"]) == ["OK"]
    assert flaky.calls == ["bad", "ok"]
    assert harness.dead_letters == []
    assert harness.counters == {"seen": 1}
    assert harness.logs == []  # no log topic: nothing is published
    assert (harness.stats.user_exceptions, harness.stats.dead_lettered) == (1, 0)


def test_a_failing_vectorized_batch_is_dead_lettered_whole() -> None:
    calls = []

    @vectorized
    def picky(batch: pa.RecordBatch, context: Context) -> pa.RecordBatch:
        calls.append(batch.num_rows)
        context.incr_counter("batches", 1)
        if "bad" in batch.column("value").to_pylist():
            msg = "a bad row"
            raise RuntimeError(msg)
        return batch.select(["value"])

    harness = FunctionHarness(picky, dead_letter_topic="dlq", max_message_retries=1)
    assert harness.send_many(["a", "bad"]) == []
    assert harness.send_many(["c"]) == ["c"]
    assert calls == [2, 2, 1]
    assert [v for v, _ in harness.dead_letters] == ["a", "bad"]
    assert {p["EXCEPTION"] for _, p in harness.dead_letters} == {"RuntimeError: a bad row"}
    assert harness.counters == {"batches": 1}
    assert (harness.stats.received, harness.stats.processed_successfully) == (3, 1)


def test_vectorized_outputs_are_encoded_for_the_output_topic() -> None:
    # Strings and bytes go to string and bytes topics as columns; JSON topics
    # and other types are encoded value by value.
    def returning(column: pa.Array) -> Any:
        return vectorized(lambda batch: pa.table({"value": column}))

    strings = pa.array(["x", None], pa.large_string())
    assert FunctionHarness(returning(strings)).send_many(["a", "b"]) == ["x", None]
    raw = pa.array([b"\x00\xff", b"y"], pa.binary())
    assert FunctionHarness(returning(raw), output_schema="bytes").send_many(["a", "b"]) == [
        b"\x00\xff",
        b"y",
    ]
    json_out = FunctionHarness(returning(pa.array([1, 2])), output_schema="json")
    assert json_out.send_many(["a", "b"]) == [1, 2]

    harness = FunctionHarness(returning(raw), dead_letter_topic="dlq", max_message_retries=0)
    assert harness.send_many(["a", "b"]) == []
    [(_, properties), _] = harness.dead_letters
    assert "UnicodeDecodeError" in properties["EXCEPTION"]


def test_vectorized_keys_and_properties_reach_the_output() -> None:
    props = pa.array([[("source", "batch")], None], pa.map_(pa.string(), pa.string()))

    @vectorized
    def tagged(batch: pa.RecordBatch) -> pa.Table:
        return pa.table({"key": ["k1", "k2"], "value": ["a", "b"], "properties": props})

    harness = FunctionHarness(tagged)
    assert harness.send_many(["a", "b"]) == ["a", "b"]
    assert [(m.key, m.properties) for m in harness.messages] == [
        ("k1", {"source": "batch"}),
        ("k2", {}),
    ]


def test_returning_an_unencodable_value_is_a_user_exception() -> None:
    harness = FunctionHarness(lambda _: 42, dead_letter_topic="dlq", max_message_retries=0)
    assert harness.send("x") == []
    [(_, properties)] = harness.dead_letters
    assert properties["EXCEPTION"].startswith(
        "TypeError: function public/default/test returned a int"
    )


# --- logs, metrics, lifecycle --------------------------------------------------------


def test_logs_go_to_the_log_topic_with_their_level() -> None:
    def chatty(input: str, context: Context) -> None:
        context.get_logger().warning("saw %s", input)
        context.get_logger().debug("below the level")

    harness = FunctionHarness(chatty, log_topic="logs")
    harness.send("x")
    [log] = harness.messages
    assert (log.kind, log.topic, log.value) == ("log", "public/default/logs", "saw x")
    assert log.properties == {
        "level": "WARNING",
        "function": "public/default/test",
        "instance_id": "0",
        "message_id": "0:0",
    }
    assert harness.logs == ["saw x"]


def test_metrics_are_summaries_over_all_batches() -> None:
    def measure(input: str, context: Context) -> None:
        context.record_metric("len", len(input))

    harness = FunctionHarness(measure)
    harness.send_many(["a", "abc"])
    harness.send("ab")
    summary = harness.metrics["len"]
    assert (summary.count, summary.sum, summary.min, summary.max) == (3, 6.0, 1.0, 3.0)
    assert harness.stats.latency_count == 3
    assert harness.stats.last_invocation_ms is not None


class Lifecycle(Function):
    def __init__(self) -> None:
        self.events: list[str] = []

    def initialize(self, context: Context) -> None:
        self.events.append("initialize")

    def process(self, input: str, context: Context) -> str:
        self.events.append(f"process {input}")
        return input

    def close(self) -> None:
        self.events.append("close")


def test_initialize_before_the_first_message_and_close_exactly_once() -> None:
    function = Lifecycle()
    with FunctionHarness(function) as harness:
        harness.send("a")
        harness.send_many(["b", "c"])
        harness.close()
        harness.close()
        assert harness.lifecycle is HarnessState.CLOSED
    assert function.events == ["initialize", "process a", "process b", "process c", "close"]
    with pytest.raises(HarnessClosedError, match="the harness is closed"):
        harness.send("d")
    assert function.events[-1] == "close"


def test_an_uninitialized_function_is_not_closed() -> None:
    function = Lifecycle()
    FunctionHarness(function).close()
    assert function.events == []


def test_two_harnesses_of_one_function_keep_their_logs_apart() -> None:
    def log(input: str, context: Context) -> None:
        context.get_logger().info(input)

    first = FunctionHarness(log, log_topic="logs")
    second = FunctionHarness(log, log_topic="logs")
    first.send("one")
    second.send("two")
    assert (first.logs, second.logs) == (["one"], ["two"])


def test_the_harness_does_not_load_spark() -> None:
    import subprocess

    code = (
        "import sys; from sparkfn.testing import FunctionHarness; "
        "FunctionHarness(lambda s: s).send('x'); print('pyspark' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_docstring_examples_hold() -> None:
    import doctest

    import sparkfn.testing
    import sparkfn.testing.harness
    import sparkfn.testing.topics

    for module in (sparkfn.testing, sparkfn.testing.harness, sparkfn.testing.topics):
        result = doctest.testmod(module, raise_on_error=False)
        assert result.attempted > 0, module.__name__
        assert result.failed == 0, module.__name__


def test_unset_retries_wait_for_redeliver_and_are_never_dead_lettered() -> None:
    """Pulsar's default, as on Spark: a failed message waits (the delay), and each
    :meth:`redeliver` delivers it again; one failing twice then succeeding is processed."""
    flaky = Flaky()
    harness = FunctionHarness(flaky, topic_schemas=SIDE)
    assert harness.send_many(["bad", "ok"]) == ["OK"]  # the one behind it goes on
    [(value, properties)] = harness.waiting
    assert (value, properties["RECONSUMETIMES"]) == ("bad", "1")
    assert harness.redeliver() == []
    assert [p["RECONSUMETIMES"] for _, p in harness.waiting] == ["2"]
    assert harness.dead_letters == [] and harness.redeliver() == []
    assert flaky.calls == ["bad", "ok", "bad", "bad"]
    assert harness.stats.user_exceptions == 3
    calls: list[str] = []

    def twice_down(text: str) -> str:
        calls.append(text)
        if len(calls) <= 2:
            raise ConnectionError("database is down")
        return text.upper()

    recovering = FunctionHarness(twice_down)
    assert recovering.send("row") == [] and recovering.redeliver() == []
    assert recovering.redeliver() == ["ROW"]
    assert recovering.waiting == [] and recovering.dead_letters == []


def test_an_unacknowledged_message_under_timeout_ms_comes_back_after_it_without_end() -> None:
    """``autoAck: false`` with ``timeoutMs`` and unset retries, as in Pulsar: each call's
    output is published, and a message left unacknowledged waits ``timeoutMs`` (its
    ``DELAY_TIME``), then comes again, until acknowledged; never dead-lettered."""
    acker = Path(__file__).resolve().parents[1] / "runtime" / "funcs" / "ack_on_redelivery.py"
    config = FunctionConfig.build(
        name="acker", py=str(acker), classname="ack_on_redelivery.AckOnRedelivery",
        inputs=["in"], output="out", auto_ack=False, timeout_ms=500,
    )  # fmt: skip
    harness = FunctionHarness(config, input_schema="bytes", output_schema="bytes")
    assert len(harness.send(b"m0")) == 1  # published, though not acknowledged
    [(_, properties)] = harness.waiting
    assert properties["DELAY_TIME"] == "500"
    assert properties["EXCEPTION"].startswith("NotAcknowledgedError: ")
    assert len(harness.redeliver()) == 1 and harness.waiting == []  # acknowledged this time
    harness.send(b"never")
    for _ in range(3):
        assert len(harness.redeliver()) == 1
    assert [p["RECONSUMETIMES"] for _, p in harness.waiting] == ["4"]
    assert harness.dead_letters == [] and harness.stats.user_exceptions == 0
