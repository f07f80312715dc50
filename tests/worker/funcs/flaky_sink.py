"""A sink whose database is down while a file exists (issue 38, point 1).

``write()`` appends a JSON line ``{"value", "topic", "message_id", "t", "ok"}``
to ``configs["log"]`` per call; a value starting with ``db`` raises
``ConnectionError`` while the file ``configs["down"]`` exists, and
``poison`` always raises.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from sparkfn.api.connector import Record, Sink, SinkContext


class FlakySink(Sink):
    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        self.log = str(config["log"])
        self.down = str(config["down"])

    def write(self, record: Record) -> None:
        raw = record.value
        value = raw.decode() if isinstance(raw, bytes) else str(raw)
        ok = value != "poison" and not (value.startswith("db") and os.path.exists(self.down))
        line = {"value": value, "topic": record.topic, "message_id": record.message_id}
        line.update({"t": time.time(), "ok": ok})
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)
        if value == "poison":
            raise ValueError("cannot write poison")
        if not ok:
            raise ConnectionError("database is down")
