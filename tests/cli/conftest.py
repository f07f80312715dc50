"""Fixtures running the real ``sparkfn`` command in a child process.

``cli`` points ``SPARKFN_DATA_DIR`` at the test's data directory (SQLite
default store); ``pg_cli`` adds ``SPARKFN_STORE_URL`` for the session's
PostgreSQL schema. Nothing is imported in-process: what is tested is what a
user runs, each command a process of its own (forked from one that imported
the command: ``cli_forks.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import Cli, cli_env


@pytest.fixture
def cli(data_dir: Path) -> Cli:
    """``sparkfn`` on a fresh SQLite store in ``data_dir``."""
    return Cli(cli_env(data_dir))


@pytest.fixture
def pg_cli(data_dir: Path, pg_url: str) -> Cli:
    """``sparkfn`` on the session's PostgreSQL schema (shared: use unique topic names)."""
    return Cli(cli_env(data_dir, pg_url))
