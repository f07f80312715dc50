"""Fixtures of the cluster's tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sparkfn.store.store import Store


@pytest.fixture
def pg_store(pg_schema_urls: Callable[[], str], data_dir: Path) -> Iterator[Store]:
    """A PostgreSQL store in a schema of its own (the leader lock is per schema)."""
    store = Store.open(pg_schema_urls(), data_dir)
    yield store
    store.close()
