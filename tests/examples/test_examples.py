"""Every example in ``examples/`` runs as a function on the real Spark runtime.

Each test produces input to real topics, runs the example through
:class:`~sparkfn.runtime.function_run.FunctionRun` on the session's SparkSession
from the earliest offset until the input is drained, and checks exactly what
arrived on every topic and what the function's state holds. Word count and
routing run on both store backends (``store``); the others, whose store use
is the same, on SQLite only, to keep Spark time down.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkfn import Consumer, FunctionConfig, FunctionRun, Producer, Store, TopicAdmin
from sparkfn.topics.message import Message, encode_value

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUN_TIMEOUT_S = 180


def produce(
    store: Store,
    topic: str,
    schema: str,
    values: list[Any],
    key_of: Callable[[Any], str] | None = None,
) -> None:
    """Create ``topic`` (2 partitions) and append ``values`` in one batch."""
    TopicAdmin(store).create(topic, partitions=2, schema_type=schema)
    producer = Producer(store, topic)
    producer.send_batch(
        [
            Message(
                encode_value(v, producer.topic.schema_type, topic=topic),
                key=None if key_of is None else key_of(v),
            )
            for v in values
        ]
    )


def create(store: Store, *topics: tuple[str, str]) -> None:
    """Create output topics: ``(name, schema type)`` pairs, 2 partitions each."""
    for topic, schema in topics:
        TopicAdmin(store).create(topic, partitions=2, schema_type=schema)


def run_example(spark: Any, store: Store, **fields: Any) -> FunctionRun:
    """Run an example function over everything in its inputs; return the finished run."""
    config = FunctionConfig.build(subscription_position="earliest", **fields)
    with FunctionRun(config, store=store, spark=spark) as run:
        run.start(until_drained=True)
        assert run.wait(timeout=RUN_TIMEOUT_S), f"{config.fqfn} did not drain in {RUN_TIMEOUT_S} s"
    return run


def values(store: Store, topic: str) -> list[Any]:
    """Every value on ``topic``, decoded per its schema, in partition/offset order."""
    received = Consumer(store, topic, initial_position="earliest").receive(max_messages=100_000)
    schema = TopicAdmin(store).get(topic).schema_type.value
    decode = {"bytes": bytes, "string": bytes.decode, "json": json.loads}[schema]
    ordered = sorted(received, key=lambda m: (m.partition, m.offset))
    return [None if m.value is None else decode(m.value) for m in ordered]


def counters(run: FunctionRun) -> dict[str, int]:
    return {k: s.counter for k, s in run.state().items() if s.counter is not None}


def assert_all_processed(run: FunctionRun, received: int) -> None:
    stats = run.stats()
    assert (stats.received_total, stats.processed_successfully_total) == (received, received)
    assert (stats.user_exceptions_total, stats.system_exceptions_total) == (0, 0)


# --- both backends ------------------------------------------------------------------

SENTENCES = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "the dog sleeps",
    "pulsar functions on spark",
    "spark runs the functions",
    "apple apple apple",
]


def test_wordcount_counts_every_word_exactly_once(spark: Any, store: Store) -> None:
    produce(store, "sentences", "string", SENTENCES)
    create(store, ("echo", "string"))
    run = run_example(
        spark,
        store,
        name="wordcount",
        py=str(EXAMPLES / "wordcount.py"),
        classname="wordcount.WordCount",
        inputs=["sentences"],
        output="echo",
        parallelism=2,
        processing_guarantees="effectively_once",
    )
    expected = Counter(word for sentence in SENTENCES for word in sentence.split())
    assert Counter(values(store, "echo")) == Counter(SENTENCES)
    assert counters(run) == dict(expected)
    assert {k: s.value for k, s in run.state().items()} == dict.fromkeys(expected)
    assert run.get_counter("the") == 4
    assert run.get_counter("apple") == 3
    assert run.get_counter("absent") == 0
    assert_all_processed(run, len(SENTENCES))


PRODUCTS = ["apple", "Kale", "rock", "banana", "carrot", "apple", "paper", "leek", "pear"]


def test_routing_publishes_each_product_to_its_topic(spark: Any, store: Store) -> None:
    produce(store, "products", "string", PRODUCTS)
    create(store, ("other", "string"), ("shop/food/fruits", "string"), ("vegetables", "string"))
    run = run_example(
        spark,
        store,
        name="router",
        py=str(EXAMPLES / "routing.py"),
        classname="routing.Router",
        inputs=["products"],
        output="other",
        user_config={"fruit_topic": "shop/food/fruits", "vegetable_topic": "vegetables"},
    )
    assert Counter(values(store, "shop/food/fruits")) == Counter(
        ["apple", "apple", "banana", "pear"]
    )
    assert Counter(values(store, "vegetables")) == Counter(["kale", "carrot", "leek"])
    assert Counter(values(store, "other")) == Counter(["rock", "paper"])
    assert run.state() == {}
    assert_all_processed(run, len(PRODUCTS))


# --- SQLite only --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("py", "classname", "user_config", "suffix", "keyed"),
    [
        # A native function gets Pulsar's behaviour: its Python runtime forwards no key.
        ("exclamation.py", None, {}, "!", False),
        ("exclamation_class.py", "exclamation_class.Exclamation", {"suffix": "?!"}, "?!", True),
    ],
    ids=["plain-function", "function-class"],
)
def test_exclamation_forms_and_keys(
    spark: Any,
    sqlite_store: Store,
    py: str,
    classname: str | None,
    user_config: dict[str, str],
    suffix: str,
    keyed: bool,
) -> None:
    words = [f"word{i}" for i in range(20)]
    produce(sqlite_store, "in", "string", words, key_of=lambda w: f"k-{w}")
    create(sqlite_store, ("out", "string"))
    run = run_example(
        spark,
        sqlite_store,
        name="exclaim",
        py=str(EXAMPLES / py),
        classname=classname,
        inputs=["in"],
        output="out",
        user_config=user_config,
    )
    received = Consumer(sqlite_store, "out", initial_position="earliest").receive(1000)
    assert sorted((m.key, m.value.decode()) for m in received if m.value) == sorted(
        (f"k-{w}" if keyed else None, w + suffix) for w in words
    )
    assert run.state() == {}
    assert_all_processed(run, len(words))


def test_pulsar_function_runs_unchanged_with_no_flag(spark: Any, sqlite_store: Store) -> None:
    produce(sqlite_store, "in", "string", ["hello", "pulsar", "hello"])
    create(sqlite_store, ("out", "string"))
    run = run_example(
        spark,
        sqlite_store,
        name="pulsar-exclaim",
        py=str(EXAMPLES / "pulsar_exclamation.py"),
        classname="pulsar_exclamation.ExclamationFunction",
        inputs=["in"],
        output="out",
    )
    assert Counter(values(sqlite_store, "out")) == Counter(["hello!", "pulsar!", "hello!"])
    assert counters(run) == {"seen": 3}
    assert_all_processed(run, 3)


ORDERS = [
    {"id": 1, "items": [{"price": 2.5, "qty": 2}, {"price": 1.0, "qty": 1}]},
    {"id": 2, "items": []},
    {"id": 3, "items": [{"price": 10.0, "qty": 3}]},
    {"id": 4},
]


def test_json_transform_turns_orders_into_totals(spark: Any, sqlite_store: Store) -> None:
    produce(sqlite_store, "orders", "json", ORDERS)
    create(sqlite_store, ("totals", "json"), ("order-logs", "string"))
    run = run_example(
        spark,
        sqlite_store,
        name="order-total",
        py=str(EXAMPLES / "json_transform.py"),
        classname="json_transform.OrderTotal",
        inputs=["orders"],
        output="totals",
        log_topic="order-logs",
    )
    assert sorted(values(sqlite_store, "totals"), key=lambda o: o["id"]) == [
        {"id": 1, "total": 6.0, "items": 2},
        {"id": 3, "total": 30.0, "items": 1},
    ]
    assert sorted(values(sqlite_store, "order-logs")) == [
        "order 2 has no items; skipped",
        "order 4 has no items; skipped",
    ]
    assert run.stats().user_metrics["order_total"].model_dump() == {
        "count": 2,
        "sum": 36.0,
        "min": 6.0,
        "max": 30.0,
    }
    assert run.state() == {}
    assert_all_processed(run, len(ORDERS))


@pytest.fixture
def signing_key(spark: Any) -> Iterator[str]:
    """``ENRICH_SIGNING_KEY`` in the environment of Spark's Python workers.

    The session's JVM (and the Python workers it starts) was launched before
    this test, so setting ``os.environ`` here would not reach them; the
    SparkContext's ``environment`` is what PySpark passes to workers it
    starts for the functions defined from now on.
    """
    environment = spark.sparkContext.environment
    environment["ENRICH_SIGNING_KEY"] = "s3cret"
    try:
        yield "s3cret"
    finally:
        del environment["ENRICH_SIGNING_KEY"]


def test_enrich_adds_config_fields_and_a_signature_from_a_secret(
    spark: Any, sqlite_store: Store, signing_key: str
) -> None:
    records = [{"id": i, "name": f"customer {i}"} for i in range(5)]
    produce(sqlite_store, "customers", "json", records)
    create(sqlite_store, ("enriched", "json"))
    run = run_example(
        spark,
        sqlite_store,
        name="enrich",
        py=str(EXAMPLES / "enrich.py"),
        classname="enrich.Enrich",
        inputs=["customers"],
        output="enriched",
        user_config={"source": "crm", "prefix": "cust-"},
        secrets={"signing_key": "env:ENRICH_SIGNING_KEY"},
    )

    def signed(record: dict[str, Any]) -> str:
        payload = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
        return hmac.new(signing_key.encode(), payload, hashlib.sha256).hexdigest()

    assert sorted(values(sqlite_store, "enriched"), key=lambda r: r["id"]) == [
        {**r, "source": "crm", "tag": f"cust-{r['id']}", "signature": signed(r)} for r in records
    ]
    assert run.state() == {}
    assert_all_processed(run, len(records))


@pytest.mark.parametrize(
    "classname",
    ["vectorized_upper.Upper", "vectorized_upper.upper_pandas"],
    ids=["arrow-class", "pandas-function"],
)
def test_vectorized_upper_uppercases_every_value(
    spark: Any, sqlite_store: Store, classname: str
) -> None:
    words = [f"word {i}" for i in range(50)]
    produce(sqlite_store, "in", "string", words, key_of=lambda w: w.split()[1])
    create(sqlite_store, ("out", "string"))
    run = run_example(
        spark,
        sqlite_store,
        name="upper",
        py=str(EXAMPLES / "vectorized_upper.py"),
        classname=classname,
        inputs=["in"],
        output="out",
    )
    received = Consumer(sqlite_store, "out", initial_position="earliest").receive(1000)
    assert sorted((m.key, m.value.decode()) for m in received if m.value) == sorted(
        (w.split()[1], w.upper()) for w in words
    )
    assert run.state() == {}
    assert_all_processed(run, len(words))
