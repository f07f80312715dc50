"""``topics produce`` creates its topic on first use, and ``topics auto-creation``
shows and changes the store's setting (issue 29, point 1), on both stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import Cli


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_produce_creates_and_auto_creation_turns_it_off(
    request: pytest.FixtureRequest, data_dir: Path, backend: str
) -> None:
    cli: Cli = request.getfixturevalue("cli" if backend == "sqlite" else "pg_cli")
    topic = f"made-{backend}-{data_dir.name}"[:100]  # the PostgreSQL schema is shared
    shown = cli.ok("topics", "auto-creation", "--json")
    assert json.loads(shown.stdout) == {
        "allow_auto_topic_creation": True,
        "partitions": 1,
        "schema_type": "bytes",
    }
    cli.ok("topics", "produce", f"persistent://public/default/{topic}", "-m", "hello")
    described = json.loads(cli.ok("topics", "describe", topic, "--json").stdout)
    assert (described["partitions"], described["schema_type"]) == (1, "bytes")

    changed = cli.ok("topics", "auto-creation", "--disable", "-p", "3", "--schema-type", "string")
    assert changed.stdout == "topic creation on first use: off (3 partition(s), string)\n"
    try:
        refused = cli.fail("topics", "produce", f"{topic}-2", "-m", "hello")
        assert refused.stderr == (
            f"error [topic_not_found]: topic public/default/{topic}-2 does not exist\n"
        )
        cli.ok("topics", "auto-creation", "--enable")
        cli.ok("topics", "produce", f"{topic}-2", "-m", "hello")
        described = json.loads(cli.ok("topics", "describe", f"{topic}-2", "--json").stdout)
        assert (described["partitions"], described["schema_type"]) == (3, "string")
    finally:  # the PostgreSQL schema is the session's: leave it as found
        cli.ok("topics", "auto-creation", "--enable", "-p", "1", "--schema-type", "bytes")
        for name in (topic, f"{topic}-2"):
            cli.run("topics", "delete", name, "--yes")
