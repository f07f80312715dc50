"""A user's source for the worker tests: ``count`` records ``n-0``, ``n-1``, ... then the end."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkfn.api.connector import END_OF_STREAM, Record, Source, SourceContext


class CountingSource(Source):
    """Counts to ``configs["count"]`` (default 10), ``prefix`` first, then ends the stream."""

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        self.count = int(config.get("count", 10))
        self.prefix = str(config.get("prefix", "n"))
        self.next = 0

    def read(self) -> Any:
        if self.next >= self.count:
            return END_OF_STREAM
        records = []
        while self.next < self.count and len(records) < 100:
            records.append(Record(value=f"{self.prefix}-{self.next}", sequence_id=self.next))
            self.next += 1
        return records

    def close(self) -> None:
        """Nothing held."""


class FailingSource(Source):
    """Raises on its first read: the source's own exception, fatal."""

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Nothing to open."""

    def read(self) -> Any:
        msg = "the upstream is gone"
        raise ConnectionError(msg)

    def close(self) -> None:
        """Nothing held."""
