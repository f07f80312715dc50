"""``postgres``: rows of a PostgreSQL table, incrementally by a monotonic column (psycopg 3).

::

    sparkfn sources localrun --source-type postgres --output orders \\
        --source-config '{"url": "postgresql://app@db/shop", "table": "orders", "offset_column": "id"}'

configs (snake_case, as the ``postgres`` sink's):

``url`` (required)
    ``postgresql://user:password@host:port/database``.
``table`` (required)
    ``name`` or ``schema.name``.
``offset_column`` (required)
    The column rows are read in order of, and resumed after: an integer
    (best), numeric, text or timestamp column.
``columns``
    The columns of each record's value (default: all), a list or a
    comma-separated string.
``key_column``
    A column whose text becomes the record's key.
``rows_per_read``
    Rows one query returns at most (default 1000).

Each record's value is the row as a JSON object (``{column: value}``;
timestamps and decimals as text, bytea as hex); its ``properties`` hold
``table`` and ``offset``.

**Offset.** The source keeps the offset column's last appended value in the
source's state in the sparkfn store (``put_state``, key
``offset:<table>:<column>``), written in ``commit()``, that is once the rows
are appended. A restart, a new ``localrun`` or a worker resumes after it.
Each query is ``WHERE offset_column > <offset> ORDER BY offset_column LIMIT
rows_per_read``.

**Guarantees.** At-least-once: a crash between the append and the state
write reads those rows again. With an integer ``offset_column``, each record
has ``sequence_id`` = the column's value and ``source_partition`` = the
table, so under ``effectively_once`` the store drops them instead: each row
lands once. **What it cannot promise:** it sees inserts only (an updated or
deleted row is not read again), and the column must grow in *commit* order
and be unique. A row committed later with a smaller value than one already
read (two transactions taking values from a sequence and committing in the
other order), or with the same value as the last one read, is never read.
For such tables fill the column from a commit-ordered source, or read a view
that holds back recent rows. One instance per table: parallelism must be 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql
from pydantic import Field, field_validator

from sparkfn.api.connector import Record, Source, SourceContext, _EndOfStream
from sparkfn.api.errors import BrokerUnreachableError, ConfigError
from sparkfn.connectors.builtin._broker import CHECK_SECONDS, BrokerCheck, lost_broker, run_check
from sparkfn.connectors.builtin._config import (
    MAX_ITEMS,
    BuiltinConfig,
    Count,
    describe,
    dumps,
    parse_configs,
    split_list,
    sql_table_name,
)

INTEGER_TYPES = {"smallint", "integer", "bigint"}


class PostgresSourceConfig(BuiltinConfig):
    """The postgres source's configs."""

    url: str = Field(min_length=1)
    table: str = Field(min_length=1)
    offset_column: str = Field(min_length=1)
    columns: list[str] | None = Field(default=None, max_length=MAX_ITEMS)
    key_column: str | None = None
    rows_per_read: Count = 1000

    @field_validator("columns", mode="before")
    @classmethod
    def _columns(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        return sql_table_name(value)


# A query may take this many times the connect timeout: 60 s for a run's reads, 30 s for
# a check (whose thread the check's own 5 s bound has left by then).
STATEMENTS_PER_CONNECT = 6


def _connect(cfg: PostgresSourceConfig, what: str, timeout: int = 10) -> psycopg.Connection[Any]:
    try:
        conn = psycopg.connect(cfg.url, autocommit=True, connect_timeout=timeout)
        # Every query of the source (and of its check) is bounded too: a locked or
        # huge table is an error naming the step, not a read that never returns.
        conn.execute(f"SET statement_timeout = {int(timeout * 1000 * STATEMENTS_PER_CONNECT)}")
        return conn
    except psycopg.Error as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f"PostgreSQL at {_server(cfg.url)}"
        if exc.sqlstate is not None:  # the server answered: credentials, database
            msg = f"{what}: configs.url: {where} refused the connection: {text}"
            raise ConfigError(msg) from None
        msg = f"{what}: configs.url: cannot connect to {where} (step: connect): {text}"
        raise BrokerUnreachableError(msg) from None


def _server(url: str) -> str:
    """``host:port/dbname`` of a connection URL or string, without its credentials."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "(an unparsable url)"
    host = info.get("host") or info.get("hostaddr") or "localhost"
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


def _column_types(
    conn: psycopg.Connection[Any], cfg: PostgresSourceConfig, what: str
) -> dict[str, str]:
    """``{column: data type}`` of the table; a :class:`ConfigError` if it or a column is missing."""
    schema, _, name = cfg.table.rpartition(".")
    found = conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        [cfg.table if schema else name],
    ).fetchall()
    if not found:
        msg = f"{what}: configs.table: table {cfg.table!r} does not exist"
        raise ConfigError(msg)
    types = {str(n): str(t) for n, t in found}
    wanted = [("offset_column", cfg.offset_column)]
    wanted += [("columns", c) for c in cfg.columns or ()]
    if cfg.key_column is not None:
        wanted.append(("key_column", cfg.key_column))
    for field, column in wanted:
        if column not in types:
            msg = (
                f"{what}: configs.{field}: table {cfg.table!r} has no column {column!r} "
                f"(it has: {', '.join(types)})"
            )
            raise ConfigError(msg)
    return types


def _plain(value: Any) -> Any:
    """A column value as JSON takes it."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value


class PostgresTableSource(Source):
    """Reads new rows of a table in the order of a monotonic column."""

    def __init__(self) -> None:
        self.what = "source (postgres)"
        self.config: PostgresSourceConfig | None = None
        self.context: SourceContext | None = None
        self.conn: psycopg.Connection[Any] | None = None
        self.query: sql.Composed | None = None
        self.offset_type = "bigint"
        self.integer = False
        self.state_key = ""
        self.read_to: str | None = None  # the last offset read
        self.acked_to: str | None = None  # the last offset appended
        self.saved_to: str | None = None  # the offset in the source's state
        self.selected: list[str] = []

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: configs, the server, the table and its columns."""
        cfg = parse_configs(PostgresSourceConfig, configs, what)

        def check(progress: BrokerCheck) -> None:
            with _connect(cfg, what, int(CHECK_SECONDS)) as conn:
                progress.step = f"look up table {cfg.table!r}"
                _column_types(conn, cfg, what)

        run_check(what, "PostgreSQL", _server(cfg.url), check)

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Check the table, load the offset from the source's state."""
        self.what = describe("source", "postgres", context)
        self.context = context
        cfg = self.config = parse_configs(PostgresSourceConfig, config, self.what)
        if context.get_num_instances() != 1:
            msg = f"{self.what}: parallelism: the postgres source reads a table in order with one instance; got {context.get_num_instances()}"
            raise ConfigError(msg)
        self.conn = _connect(cfg, self.what)
        types = _column_types(self.conn, cfg, self.what)
        self.offset_type = types[cfg.offset_column]
        self.integer = self.offset_type in INTEGER_TYPES
        selected = cfg.columns or list(types)
        extra = [c for c in (cfg.offset_column, cfg.key_column) if c and c not in selected]
        table = sql.Identifier(*cfg.table.split("."))
        offset = sql.Identifier(cfg.offset_column)
        self.query = sql.SQL(
            "SELECT {cols} FROM {table} WHERE {offset} > CAST(%(after)s AS {type}) OR "
            "CAST(%(after)s AS {type}) IS NULL ORDER BY {offset} LIMIT %(limit)s"
        ).format(
            cols=sql.SQL(", ").join(sql.Identifier(c) for c in selected + extra),
            table=table,
            offset=offset,
            type=sql.SQL(self.offset_type),
        )
        self.selected = selected
        self.state_key = f"offset:{cfg.table}:{cfg.offset_column}"
        stored = context.get_state(self.state_key)
        self.saved_to = self.acked_to = self.read_to = (
            json.loads(stored)["after"] if stored is not None else None
        )

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """The next rows after what was read, up to ``rows_per_read``."""
        cfg, conn, query = self.config, self.conn, self.query
        if cfg is None or conn is None or query is None:
            msg = f"{self.what}: read() before open()"
            raise RuntimeError(msg)
        where = _server(cfg.url)
        with lost_broker(self.what, "PostgreSQL", where, "read", (psycopg.OperationalError,)):
            with conn.cursor() as cursor:
                cursor.execute(query, {"after": self.read_to, "limit": cfg.rows_per_read})
                names = [d.name for d in cursor.description or ()]
                rows = cursor.fetchall()
        records: list[Record] = []
        for row in rows:
            values = dict(zip(names, row, strict=True))
            raw_offset = values[cfg.offset_column]
            offset = (
                raw_offset.isoformat()
                if isinstance(raw_offset, datetime | date)
                else str(raw_offset)
            )
            key = values.get(cfg.key_column) if cfg.key_column else None
            value = {c: _plain(values[c]) for c in self.selected}
            records.append(
                Record(
                    value=dumps(value),
                    key=None if key is None else str(_plain(key)),
                    properties={"table": cfg.table, "offset": offset},
                    sequence_id=int(raw_offset) if self.integer else None,
                    source_partition=cfg.table if self.integer else None,
                )
            )
            self.read_to = offset
        return records or None

    def ack(self, record: Record) -> None:
        """The row is appended: the offset moves past it."""
        self.acked_to = record.properties.get("offset", self.acked_to)

    def commit(self) -> None:
        """Store the offset in the source's state (durable when this returns)."""
        if self.context is not None and self.acked_to != self.saved_to:
            self.context.put_state(self.state_key, json.dumps({"after": self.acked_to}))
            self.saved_to = self.acked_to

    def close(self) -> None:
        """Disconnect; the offset was stored by the last ``commit()``."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
