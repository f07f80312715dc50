"""The built-in sinks, called directly as the Spark sink runtime calls them: open, write
per record, flush per task, close. The postgres sink runs against the real server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from connector_probes import StaticSinkContext

from sparkfn.api.connector import Record
from sparkfn.api.errors import ConfigError
from sparkfn.connectors.builtin.file_sink import FileSink
from sparkfn.connectors.builtin.postgres_sink import PostgresSink
from sparkfn.connectors.builtin.stdout_sink import StdoutSink

EVENT_MS = 1_714_564_800_123  # 2024-05-01T12:00:00.123Z


def _records(*values: object, topic: str = "public/default/raw") -> list[Record]:
    return [
        Record(
            value,
            key=f"k{i}",
            properties={"i": str(i)},
            event_time=EVENT_MS,
            topic=topic,
            message_id=f"0:{i}",
        )
        for i, value in enumerate(values)
    ]


# --- file ------------------------------------------------------------------------------


def test_file_sink_appends_json_lines_on_flush_only(tmp_path: Path) -> None:
    path = tmp_path / "out" / "archive-{instance}.jsonl"
    sink = FileSink()
    sink.open({"path": str(path)}, StaticSinkContext(instance_id=2))
    target = tmp_path / "out" / "archive-2.jsonl"
    try:
        for record in _records("text", {"doc": [1, 2]}, b"\x00\xff"):
            sink.write(record)
        assert target.read_text() == ""  # buffered until flush
        sink.flush()
        # Read through a separate file object: what flush wrote is in the file.
        lines = [json.loads(line) for line in target.read_text().splitlines()]
        assert lines[0] == {
            "topic": "public/default/raw",
            "message_id": "0:0",
            "key": "k0",
            "value": "text",
            "properties": {"i": "0"},
            "event_time": "2024-05-01T12:00:00.123000+00:00",
        }
        assert [line["value"] for line in lines] == ["text", {"doc": [1, 2]}, "00ff"]

        sink.write(_records("unflushed")[0])
    finally:
        sink.close()
    assert len(target.read_text().splitlines()) == 3  # close drops what was not flushed

    # A second object (a restarted task) appends to the same file.
    again = FileSink()
    again.open({"path": str(path), "fsync": False}, StaticSinkContext(instance_id=2))
    again.write(_records("more")[0])
    again.flush()
    again.close()
    assert json.loads(target.read_text().splitlines()[-1])["value"] == "more"


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({}, "sink public/default/archive (file): configs.path: required"),
        ({"path": ""}, "configs.path: String should have at least 1 character (got '')"),
        ({"path": "/tmp/x", "fsync": "maybe"}, "configs.fsync: Input should be a valid boolean"),
    ],
)
def test_file_sink_config_errors_name_the_sink_and_field(
    configs: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        FileSink().open(configs, StaticSinkContext())
    assert expected in str(caught.value)


# --- stdout ----------------------------------------------------------------------------


def test_stdout_sink_prints_one_json_line_per_record(capsys: pytest.CaptureFixture[str]) -> None:
    sink = StdoutSink()
    sink.open({}, StaticSinkContext())
    for record in _records("a", {"b": 1}):
        sink.write(record)
    sink.flush()
    sink.close()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["message_id"], line["value"]) for line in lines] == [
        ("0:0", "a"),
        ("0:1", {"b": 1}),
    ]


def test_stdout_sink_rejects_configs() -> None:
    with pytest.raises(ConfigError, match=r"sink public/default/archive \(stdout\): configs.x"):
        StdoutSink().open({"x": 1}, StaticSinkContext())


# --- postgres --------------------------------------------------------------------------


@pytest.fixture
def pg_schema(pg_server: str) -> Iterator[str]:
    """A fresh schema on the test server, dropped afterwards."""
    schema = f"sink_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _rows(server: str, table: str) -> list[tuple[object, ...]]:
    with psycopg.connect(server) as conn:
        return conn.execute(
            f"SELECT topic, message_id, key, value, properties, event_time FROM {table} "
            "ORDER BY topic, message_id"
        ).fetchall()


def _write_all(server: str, configs: dict[str, object], records: list[Record]) -> None:
    sink = PostgresSink()
    sink.open({"url": server, **configs}, StaticSinkContext())
    try:
        for record in records:
            sink.write(record)
        sink.flush()
    finally:
        sink.close()


def test_postgres_sink_upserts_so_a_replayed_batch_changes_nothing(
    pg_server: str, pg_schema: str
) -> None:
    table = f"{pg_schema}.events"
    configs = {"table": table, "create_table": True}
    batch = _records("a", "b", "c")
    _write_all(pg_server, configs, batch)
    first = _rows(pg_server, table)
    assert [(r[1], r[3]) for r in first] == [("0:0", "a"), ("0:1", "b"), ("0:2", "c")]
    assert first[0][4] == {"i": "0"}
    assert first[0][5].isoformat() == "2024-05-01T12:00:00.123000+00:00"

    _write_all(pg_server, configs, batch)  # the same batch again (a Spark retry)
    assert _rows(pg_server, table) == first

    # A replay that overlaps new messages: old ids are updated, new ones added;
    # the same message id in another topic is another row.
    _write_all(
        pg_server,
        configs,
        [*_records("a2", "b2"), *_records("other", topic="public/default/second")],
    )
    rows = _rows(pg_server, table)
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("public/default/raw", "0:0", "a2"),
        ("public/default/raw", "0:1", "b2"),
        ("public/default/raw", "0:2", "c"),
        ("public/default/second", "0:0", "other"),
    ]


def test_postgres_sink_jsonb_values_and_a_duplicate_within_one_flush(
    pg_server: str, pg_schema: str
) -> None:
    table = f"{pg_schema}.docs"
    records = _records({"n": 1}, [1, 2], "text")
    records.append(Record({"n": 99}, topic="public/default/raw", message_id="0:0"))
    _write_all(pg_server, {"table": table, "create_table": True, "value_type": "jsonb"}, records)
    assert [(r[1], r[3]) for r in _rows(pg_server, table)] == [
        ("0:0", {"n": 99}),  # the later write of the same id wins
        ("0:1", [1, 2]),
        ("0:2", "text"),
    ]


def test_postgres_sink_wants_the_table_unless_asked_to_create_it(
    pg_server: str, pg_schema: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresSink().open(
            {"url": pg_server, "table": f"{pg_schema}.missing"}, StaticSinkContext()
        )
    message = str(caught.value)
    assert message.startswith("sink public/default/archive (postgres): configs.table")
    assert "does not exist; create it or set configs.create_table true" in message

    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {pg_schema}.partial (topic text, message_id text)")
    with pytest.raises(ConfigError, match="lacks the columns key, value, properties, event_time"):
        PostgresSink().open(
            {"url": pg_server, "table": f"{pg_schema}.partial"}, StaticSinkContext()
        )


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({"table": "t"}, "configs.url: required"),
        ({"url": "mysql://h/db", "table": "t"}, "configs.url must be a postgresql:// URL"),
        (
            {"url": "postgresql://h/db", "table": "a.b.c"},
            "configs.table: must be name or schema.name",
        ),
        (
            {"url": "postgresql://h/db", "table": "t", "value_type": "xml"},
            "configs.value_type: Input should be 'text' or 'jsonb' (got 'xml')",
        ),
    ],
)
def test_postgres_sink_config_errors_name_the_sink_field_and_value(
    configs: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresSink().open(configs, StaticSinkContext())
    assert str(caught.value).startswith("sink public/default/archive (postgres): ")
    assert expected in str(caught.value)
