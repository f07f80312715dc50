"""Fixtures of the connector tests.

``store`` (from tests/conftest.py) runs a test on SQLite and PostgreSQL; it is
used where appending is what is tested. Lifecycle tests whose subject is the
order of calls into a source, not the store, use ``sqlite_store``: a real
store too, on one backend, to keep the suite fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkfn.store.store import Store


@pytest.fixture
def sqlite_store(data_dir: Path) -> Iterator[Store]:
    """A real SQLite store in the test's data directory."""
    opened = Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir)
    try:
        yield opened
    finally:
        opened.close()
