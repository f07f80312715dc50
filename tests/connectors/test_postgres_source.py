"""The ``postgres`` table source against the PostgreSQL server on 127.0.0.1:5432."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from brokers import (
    PG_URL,
    require,
    unique,
    values,
    wait_for,
)

from sparkfn.api.errors import ConfigError
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.registry import load_source
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin


@pytest.fixture
def table() -> Iterator[str]:
    """A table ``(id bigserial, body text, region text, at timestamptz)`` of the test's own."""
    require("postgresql")
    name = unique("sparkfn_src").replace("-", "_")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {name} (id bigserial PRIMARY KEY, body text, region text, "
            "at timestamptz DEFAULT '2026-01-02T03:04:05Z')"
        )
    yield name
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")


def insert(table: str, bodies: list[str]) -> None:
    """Insert rows, 1000 per transaction, one writer: ids grow in commit order."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for start in range(0, len(bodies), 1000):
            chunk = bodies[start : start + 1000]
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {table} (body, region) VALUES (%s, %s)",
                    [(b, f"r{i % 3}") for i, b in enumerate(chunk)],
                )


def _run(store: Store, config: SourceConfig, acked: int) -> SourceRunner:
    runner = SourceRunner(config, store)
    runner.start()
    try:
        wait_for(lambda: runner.stats.acked >= acked, f"{acked} rows acked")
        if acked == 0:
            wait_for(lambda: runner.state is SourceState.RUNNING, "running")
    finally:
        runner.stop("drain")
        assert runner.wait(30)
    assert runner.state is SourceState.STOPPED, runner.death
    return runner


def test_rows_are_appended_in_order_and_the_offset_survives_a_restart(
    store: Store, table: str
) -> None:
    TopicAdmin(store).create("rows", schema_type="string")
    bodies = [f"row {i} ✓" for i in range(2500)]
    insert(table, bodies)
    config = SourceConfig(
        name="pg", source_type="postgres", output="rows",
        configs={"url": PG_URL, "table": table, "offset_column": "id",
                 "columns": "id,body,at", "key_column": "region", "rows_per_read": 700},
    )  # fmt: skip
    _run(store, config, len(bodies))
    rows = [json.loads(v) for v in values(store, "rows")]
    assert rows == [
        {"id": i + 1, "body": b, "at": "2026-01-02T03:04:05+00:00"} for i, b in enumerate(bodies)
    ]
    # A new run resumes after the offset kept in the source's state.
    _run(store, config, 0)
    assert len(values(store, "rows")) == len(bodies)
    insert(table, ["late 1", "late 2"])
    _run(store, config, 2)
    assert [json.loads(v)["body"] for v in values(store, "rows")[-3:]] == [
        bodies[-1],
        "late 1",
        "late 2",
    ]


@pytest.mark.parametrize(
    ("configs", "error"),
    [
        ({"table": "t", "offset_column": "id"}, r"source public/default/s \(postgres\): configs\.url: required"),
        ({"url": PG_URL, "table": "t", "offset_column": "id", "column": "x"}, r"configs\.column: unknown setting"),
        ({"url": PG_URL, "table": "t", "offset_column": "id", "rows_per_read": "all"}, r"configs\.rows_per_read: .*\(got 'all'\)"),
        ({"url": "postgresql://postgres@127.0.0.1:1/test", "table": "t", "offset_column": "id"}, r"configs\.url: cannot connect"),
        ({"url": PG_URL, "table": "sparkfn_no_such_table", "offset_column": "id"}, r"configs\.table: table 'sparkfn_no_such_table' does not exist"),
        ({"url": PG_URL, "table": "TABLE", "offset_column": "nope"}, r"configs\.offset_column: table '.*' has no column 'nope' \(it has: id, body, region, at\)"),
    ],
    ids=["missing", "unknown", "ill-typed", "unreachable", "no-table", "no-column"],
)  # fmt: skip
def test_configs_are_checked_before_it_starts(
    configs: dict[str, Any], error: str, table: str
) -> None:
    if configs.get("table") == "TABLE":
        configs = {**configs, "table": table}
    with pytest.raises(ConfigError, match=error):
        load_source(SourceConfig(name="s", source_type="postgres", output="o", configs=configs))
