"""``file``: append records as JSON lines to a file.

configs:

``path`` (required)
    The file; ``{instance}`` in it is replaced by the instance id, for one
    file per instance. Its directory is created if needed.
``fsync``
    Whether ``flush()`` waits until the lines are on disk (default ``true``).

Each record becomes one line
``{"topic", "message_id", "key", "value", "properties", "event_time"}``:
``value`` as decoded from the topic (bytes as hex), ``event_time`` in ISO
8601 or ``null``. ``write()`` buffers; ``flush()`` appends the buffer with a
single ``write`` on a file opened with ``O_APPEND`` (so lines of several
processes writing the same file do not interleave) and fsyncs it. What is
buffered when ``close()`` comes without a ``flush()`` was not committed and
is dropped: its batch is replayed. Lines of a replayed batch may appear
twice (at-least-once); readers that need exactly-once keep the last line per
``(topic, message_id)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from sparkfn.api.connector import Record, Sink, SinkContext
from sparkfn.connectors.builtin._config import BuiltinConfig, describe, dumps, parse_configs


class FileSinkConfig(BuiltinConfig):
    """The file sink's configs."""

    path: str = Field(min_length=1)
    fsync: bool = True


def record_json(record: Record) -> str:
    """One record as a JSON line (without the newline)."""
    event_time = None
    if record.event_time is not None:
        event_time = datetime.fromtimestamp(record.event_time / 1000, UTC).isoformat()
    return dumps(
        {
            "topic": record.topic,
            "message_id": record.message_id,
            "key": record.key,
            "value": record.value,
            "properties": record.properties or {},
            "event_time": event_time,
        }
    )


class FileSink(Sink):
    """Appends JSON lines to a file; ``flush()`` makes them durable."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.fsync = True
        self.buffer: list[str] = []
        self.fd: int | None = None

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        """Validate the configs and open the file for appending."""
        what = describe("sink", "file", context)
        cfg = parse_configs(FileSinkConfig, config, what)
        self.fsync = cfg.fsync
        self.path = Path(cfg.path.replace("{instance}", str(context.get_instance_id())))
        self.path = self.path.expanduser().resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: Record) -> None:
        """Buffer the record's line."""
        self.buffer.append(record_json(record) + "\n")

    def flush(self) -> None:
        """Append the buffered lines in one write, then fsync."""
        if self.fd is None or not self.buffer:
            return
        data = "".join(self.buffer).encode()
        view = memoryview(data)
        while view:  # a regular file takes it all at once; a short write goes on
            written = os.write(self.fd, view)
            view = view[written:]
        self.buffer.clear()
        if self.fsync:
            os.fsync(self.fd)

    def close(self) -> None:
        """Close the file; lines not flushed are dropped (their batch did not commit)."""
        self.buffer.clear()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
