"""The built-in generator source: a bounded count ends as a drain with every record
appended exactly once, over instances; templates, keys, rate; effectively-once reruns."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from connector_probes import finish

from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import ReceivedMessage


def _config(parallelism: int = 1, guarantee: str = "at_least_once", **configs: Any) -> SourceConfig:
    return SourceConfig(
        name="gen",
        source_type="generator",
        output="demo",
        parallelism=parallelism,
        processing_guarantees=guarantee,
        batch_size=64,
        configs=configs,
    )


def _messages(store: Store) -> list[ReceivedMessage]:
    return Consumer(store, "demo", initial_position="earliest").receive(max_messages=100_000)


def _run_group(store: Store, config: SourceConfig) -> SourceInstances:
    group = SourceInstances(config, store)
    group.start()
    assert group.wait(60), group.status()
    assert group.join(10)
    return group


def test_a_bounded_generator_ends_as_a_drain_with_every_record_appended_once(
    store: Store,
) -> None:
    TopicAdmin(store).create("demo", partitions=3, schema_type="string")
    group = _run_group(store, _config(parallelism=2, count=500))

    assert group.state is SourceState.STOPPED
    assert [r.stop_mode for r in group.runners] == ["drain", "drain"]
    values = [m.value.decode() for m in _messages(store) if m.value is not None]
    assert sorted(values) == sorted(f"message-{i}" for i in range(500))
    stats = group.stats
    assert (stats.received, stats.appended, stats.acked) == (500, 500, 500)
    # The run is in the store's lifecycle record, like a function's.
    record = control.read_control(store, control.control_id("source", "public/default/gen"))
    assert record is not None and record.state == "STOPPED"
    assert {i: r.state for i, r in record.instances.items()} == {0: "STOPPED", 1: "STOPPED"}
    moves = [
        (t["instance"], t["to"])
        for t in control.transitions_of(store, control.control_id("source", "public/default/gen"))
    ]
    for instance in (0, 1):
        mine = [to for i, to in moves if i == instance]
        assert mine == ["STARTING", "RUNNING", "STOPPING", "STOPPED"], moves


def test_json_values_keys_from_a_template_and_buckets(store: Store) -> None:
    TopicAdmin(store).create("demo", schema_type="json")
    config = _config(count=6, value="order {index}", value_kind="json", key="k{bucket}", buckets=2)
    _run_group(store, config)

    messages = _messages(store)
    documents = [json.loads(m.value or b"") for m in messages]
    assert [d["index"] for d in documents] == list(range(6))
    assert [d["value"] for d in documents] == [f"order {i}" for i in range(6)]
    assert [m.key for m in messages] == ["k0", "k1"] * 3
    assert all(m.event_time is not None for m in messages)


def test_rate_spaces_the_records_out(sqlite_store: Store) -> None:
    TopicAdmin(sqlite_store).create("demo")
    started = time.monotonic()
    _run_group(sqlite_store, _config(count=30, rate=100))
    assert time.monotonic() - started >= 0.28  # 30 records at 100/s
    assert len(_messages(sqlite_store)) == 30


def test_an_effectively_once_rerun_adds_only_what_it_did_not_append_before(store: Store) -> None:
    TopicAdmin(store).create("demo", partitions=2)
    first = _run_group(store, _config(guarantee="effectively_once", count=40))
    second = _run_group(store, _config(guarantee="effectively_once", count=50))

    assert first.stats.appended == 40
    assert (second.stats.deduplicated, second.stats.appended) == (40, 10)
    values = sorted(m.value.decode() for m in _messages(store) if m.value is not None)
    assert values == sorted(f"message-{i}" for i in range(50))


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({"count": -1}, "configs.count: Input should be greater than or equal to 0 (got -1)"),
        ({"value": "n={idx}"}, "configs.value: template field {idx} is not one of"),
        ({"rate": "fast"}, "configs.rate: Input should be a valid number"),
        ({"value_kind": "xml"}, "configs.value_kind: Input should be 'string', 'bytes' or 'json'"),
    ],
)
def test_bad_configs_name_the_source_the_field_and_the_value(
    sqlite_store: Store, configs: dict[str, Any], expected: str
) -> None:
    TopicAdmin(sqlite_store).create("demo")
    runner = SourceRunner(_config(**configs), sqlite_store)
    runner.start()
    finish(runner)
    assert runner.state is SourceState.ERROR
    assert runner.death is not None and runner.death.type == "ConfigError"
    assert runner.death.message.startswith("source public/default/gen (generator): ")
    assert expected in runner.death.message
