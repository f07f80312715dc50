"""``postgres``: upsert records into a PostgreSQL table, idempotently.

configs:

``url`` (required)
    ``postgresql://user:password@host:port/database`` (psycopg 3 is used).
``table`` (required)
    ``name`` or ``schema.name``.
``create_table``
    Create the table (and nothing else) if it does not exist (default
    ``false``: it must exist, with the columns below).
``value_type``
    ``text`` (default) or ``jsonb``: the type of the ``value`` column when
    the sink creates the table, and how values are written. ``text``: strings
    as they are, bytes as UTF-8, anything else as JSON. ``jsonb``: the
    value's JSON (bytes as hex).

The table::

    topic       text        not null   -- the input topic
    message_id  text        not null   -- partition:offset within it
    key         text
    value       text | jsonb
    properties  jsonb
    event_time  timestamptz
    primary key (topic, message_id)

``write()`` buffers; ``flush()`` writes the buffer in one transaction with
``INSERT ... ON CONFLICT (topic, message_id) DO UPDATE``, so a replayed batch
(Spark retries, a restart after a crash) overwrites the same rows instead of
adding new ones: the table holds every message exactly once. A message id is
unique within its topic only, hence the topic in the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, field_validator
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    create_engine,
    inspect,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from sparkfn.api.connector import Record, Sink, SinkContext
from sparkfn.api.errors import ConfigError
from sparkfn.connectors.builtin._config import (
    BuiltinConfig,
    describe,
    dumps,
    parse_configs,
    sql_table_name,
)

COLUMNS = ("topic", "message_id", "key", "value", "properties", "event_time")


class PostgresSinkConfig(BuiltinConfig):
    """The postgres sink's configs."""

    url: str = Field(min_length=1)
    table: str = Field(min_length=1)
    create_table: bool = False
    value_type: Literal["text", "jsonb"] = "text"

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        return sql_table_name(value)


class PostgresSink(Sink):
    """Upserts records by ``(topic, message_id)`` into a PostgreSQL table."""

    def __init__(self) -> None:
        self.what = "sink (postgres)"
        self.config: PostgresSinkConfig | None = None
        self.engine: Engine | None = None
        self.table: Table | None = None
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        """Validate the configs, connect, create or check the table."""
        self.what = describe("sink", "postgres", context)
        cfg = self.config = parse_configs(PostgresSinkConfig, config, self.what)
        try:
            url = make_url(cfg.url)
        except ArgumentError as exc:
            msg = f"{self.what}: configs.url is not a database URL: {exc}"
            raise ConfigError(msg) from None
        if url.get_backend_name() != "postgresql":
            msg = (
                f"{self.what}: configs.url must be a postgresql:// URL; "
                f"got {url.render_as_string(hide_password=True)!r}"
            )
            raise ConfigError(msg)
        url = url.set(drivername="postgresql+psycopg")
        schema, _, name = cfg.table.rpartition(".")
        self.table = Table(
            name,
            MetaData(schema=schema or None),
            Column("topic", Text, nullable=False),
            Column("message_id", Text, nullable=False),
            Column("key", Text),
            Column("value", JSONB if cfg.value_type == "jsonb" else Text),
            Column("properties", JSONB),
            Column("event_time", DateTime(timezone=True)),
            PrimaryKeyConstraint("topic", "message_id"),
        )
        self.engine = create_engine(
            url,
            pool_size=1,
            max_overflow=1,
            pool_pre_ping=True,
            connect_args={"connect_timeout": 10},  # libpq's default is to wait without end
        )
        shown = url.render_as_string(hide_password=True)
        try:
            if cfg.create_table:
                self.table.metadata.create_all(self.engine, checkfirst=True)
            else:
                self._check_table(self.engine, self.table, cfg.table)
        except SQLAlchemyError as exc:
            self.close()
            reason = getattr(exc, "orig", None) or exc
            msg = f"{self.what}: cannot use table {cfg.table} at {shown}: {reason}"
            raise RuntimeError(msg) from exc
        except ConfigError:
            self.close()
            raise

    def _check_table(self, engine: Engine, expected: Table, table: str) -> None:
        inspector = inspect(engine)
        if not inspector.has_table(expected.name, schema=expected.schema):
            msg = (
                f"{self.what}: configs.table {table!r} does not exist; create it or set "
                "configs.create_table true"
            )
            raise ConfigError(msg)
        found = {c["name"] for c in inspector.get_columns(expected.name, schema=expected.schema)}
        missing = [c for c in COLUMNS if c not in found]
        if missing:
            msg = f"{self.what}: configs.table {table!r} lacks the columns {', '.join(missing)}"
            raise ConfigError(msg)

    def write(self, record: Record) -> None:
        """Buffer the record's row (a later one with the same id replaces it)."""
        if record.message_id is None:
            msg = f"{self.what}: a record has no message_id; the postgres sink upserts by it"
            raise ValueError(msg)
        topic = record.topic or ""
        event_time = None
        if record.event_time is not None:
            event_time = datetime.fromtimestamp(record.event_time / 1000, UTC)
        self.rows[(topic, record.message_id)] = {
            "topic": topic,
            "message_id": record.message_id,
            "key": record.key,
            "value": self._value(record),
            "properties": dict(record.properties or {}),
            "event_time": event_time,
        }

    def _value(self, record: Record) -> Any:
        value = record.value
        jsonb = self.config is not None and self.config.value_type == "jsonb"
        if jsonb:
            return json.loads(dumps(value)) if value is not None else None
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, bytes | bytearray | memoryview):
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError as exc:
                msg = (
                    f"{self.what}: message {record.topic}@{record.message_id}: value is not "
                    f"UTF-8 text for the text column: {exc}"
                )
                raise ValueError(msg) from exc
        return dumps(value)

    def flush(self) -> None:
        """Upsert the buffered rows in one transaction."""
        if not self.rows or self.engine is None or self.table is None:
            return
        statement = insert(self.table)
        statement = statement.on_conflict_do_update(
            index_elements=[self.table.c.topic, self.table.c.message_id],
            set_={c: statement.excluded[c] for c in ("key", "value", "properties", "event_time")},
        )
        with self.engine.begin() as conn:
            conn.execute(statement, list(self.rows.values()))
        self.rows.clear()

    def close(self) -> None:
        """Drop rows not flushed (their batch did not commit) and disconnect."""
        self.rows.clear()
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None
