"""``sparkfn topics produce`` on a full store or disk: one line, exit 1, nothing committed lost.

The store is full for real: SQLite at its page limit (``full_store_main.py``,
everywhere) or, as root, a data directory on a tmpfs filled to its last byte
(``tests/full_disk.py``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from cli_runner import Cli, Result, cli_env

from full_disk import fill, small_filesystem

FULL_STORE_MAIN = Path(__file__).with_name("full_store_main.py")


class FullStoreCli(Cli):
    """The real ``sparkfn`` command, on a SQLite store that cannot grow by a page."""

    def command(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, str(FULL_STORE_MAIN), *args]


def _lines_file(path: Path, count: int, size: int) -> tuple[Path, list[str]]:
    values = [os.urandom(size // 2).hex() for _ in range(count)]
    path.write_text("".join(v + "\n" for v in values))
    return path, values


def _consumed(cli: Cli, topic: str) -> list[str]:
    result = cli.ok("topics", "consume", topic, "--json")
    return [json.loads(line)["value"] for line in result.lines]


def _one_line_storage_full(result: Result) -> str:
    assert result.code == 1, result.describe()
    assert result.stdout == "", result.describe()
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, result.describe()
    assert line.startswith("error [storage_full]: no space left to write"), result.describe()
    return line


def test_produce_to_a_full_store_prints_one_line_and_keeps_every_committed_message(
    cli: Cli, data_dir: Path, tmp_path: Path
) -> None:
    cli.ok("topics", "create", "orders", "--schema-type", "string")
    committed: list[str] = []
    for n in range(3):
        batch, values = _lines_file(tmp_path / f"batch-{n}.txt", 10, 20_000)
        cli.ok("topics", "produce", "orders", "--file", str(batch))
        committed.extend(values)

    more, _ = _lines_file(tmp_path / "more.txt", 2, 20_000)  # inline: 40 kB of pages
    full = FullStoreCli(cli_env(data_dir)).run("topics", "produce", "orders", "--file", str(more))
    line = _one_line_storage_full(full)
    assert "database or disk is full" in line, line

    assert _consumed(cli, "orders") == committed  # every message committed before, in order
    cli.ok("topics", "produce", "orders", "--file", str(more))  # room again: it goes through
    assert len(_consumed(cli, "orders")) == len(committed) + 2


@pytest.mark.parametrize("store_on_the_disk", [True, False], ids=["store", "segments"])
def test_produce_on_a_full_disk_prints_one_line_and_keeps_every_committed_message(
    tmp_path: Path, store_on_the_disk: bool
) -> None:
    """The whole data dir on the full disk, or only the segment files (the store elsewhere)."""
    with small_filesystem(tmp_path / "disk", size="16m") as disk:
        store_url = None if store_on_the_disk else f"sqlite:///{tmp_path}/sparkfn.db"
        cli = Cli(cli_env(disk / "data", store_url))
        cli.ok("topics", "create", "big", "--schema-type", "string")
        batch, committed = _lines_file(tmp_path / "batch.txt", 2, 300_000)
        cli.ok("topics", "produce", "big", "--file", str(batch))
        more, _ = _lines_file(tmp_path / "more.txt", 2, 300_000)  # a segment file
        filler = fill(disk)

        line = _one_line_storage_full(cli.run("topics", "produce", "big", "--file", str(more)))
        if store_on_the_disk:  # a new process's SQLite cannot even make its shared memory
            assert "SQLITE_IOERR_SHMSIZE" in line, line
        else:
            assert "segment file segments/" in line and "No space left on device" in line, line

        filler.unlink()
        assert _consumed(cli, "big") == committed
        cli.ok("topics", "produce", "big", "--file", str(more))
        assert len(_consumed(cli, "big")) == 4
