from __future__ import annotations

from collections.abc import Iterator

import pytest

from sparkfn.runtime.spark import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The one local SparkSession of the test run."""
    session = spark_session(master="local[2]", app_name="sparkfn-tests")
    yield session
    session.stop()
