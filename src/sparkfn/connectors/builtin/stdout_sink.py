"""``stdout``: print each record as a JSON line (for demos and debugging).

No configs. Lines look like the file sink's
(``{"topic", "message_id", "key", "value", "properties", "event_time"}``).
On Spark executors they land in the executor's stdout log; under ``local``
masters, on the driver's stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from sparkfn.api.connector import Record, Sink, SinkContext
from sparkfn.connectors.builtin._config import BuiltinConfig, describe, parse_configs
from sparkfn.connectors.builtin.file_sink import record_json


class StdoutSinkConfig(BuiltinConfig):
    """The stdout sink takes no configs."""


class StdoutSink(Sink):
    """Prints every record as one JSON line on stdout."""

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        """Reject configs it does not know."""
        parse_configs(StdoutSinkConfig, config, describe("sink", "stdout", context))

    def write(self, record: Record) -> None:
        """Print the record."""
        sys.stdout.write(record_json(record) + "\n")

    def flush(self) -> None:
        """Flush stdout."""
        sys.stdout.flush()
