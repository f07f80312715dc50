"""Function logs: what ``context.get_logger()`` records, always somewhere a user finds it.

Every record a function instance logs (INFO and above, as Pulsar's) is
appended, as one line, to the instance's log file under the data directory,
``<data dir>/logs/functions/<tenant>/<namespace>/<name>/instance-<id>.log``,
by whichever process runs the instance (Spark's Python workers on this
machine, or a cluster's on a shared data directory); the log topic gets it
too when the function has one. ``sparkfn functions localrun`` prints these
lines on its console as they come; a worker serves them
(``GET .../logs``, ``sparkfn functions logs NAME [--follow] [--instance N]``).

A line is ``<UTC time> <LEVEL> [<fqfn>:<instance>] <message>``, written with
one ``write`` on a file opened for appending, so lines of two processes never
interleave. The files keep what is written to them; delete them to reclaim space.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

_INSTANCE_FILE = re.compile(r"instance-(\d+)\.log")


def log_dir(data_dir: str | Path, fqfn: str) -> Path:
    """The directory of function ``fqfn``'s log files."""
    return Path(data_dir) / "logs" / "functions" / fqfn


def log_file(data_dir: str | Path, fqfn: str, instance_id: int) -> Path:
    """Instance ``instance_id``'s log file."""
    return log_dir(data_dir, fqfn) / f"instance-{instance_id}.log"


class FunctionLogFile(logging.Handler):
    """Appends an instance's log records to its log file, one line each."""

    def __init__(self, path: Path, fqfn: str, instance_id: int) -> None:
        super().__init__(logging.INFO)
        self.path = path
        self.label = f"[{fqfn}:{instance_id}]"
        self._fd: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Append ``record`` as one line (a failure to write is reported by logging)."""
        try:
            moment = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            text = self.format(record).replace("\n", "\n    ")  # a traceback stays one entry
            line = f"{moment.replace('+00:00', 'Z')} {record.levelname} {self.label} {text}\n"
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._fd, line.encode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - logging's own rule: report, never raise
            self.handleError(record)

    def close(self) -> None:
        """Close the file."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        super().close()


def instance_files(data_dir: str | Path, fqfn: str, instance: int | None = None) -> list[Path]:
    """The function's instance log files (only ``instance``'s, if given), by instance id."""
    if instance is not None:
        return [log_file(data_dir, fqfn, instance)]
    found = []
    directory = log_dir(data_dir, fqfn)
    if directory.is_dir():
        for path in directory.iterdir():
            match = _INSTANCE_FILE.fullmatch(path.name)
            if match:
                found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def follow(
    data_dir: str | Path,
    fqfn: str,
    instance: int | None = None,
    *,
    from_start: bool = True,
    poll: float = 0.2,
) -> Iterator[str | None]:
    """Lines as they are logged, forever (the caller stops iterating): what is there
    first when ``from_start``, then each new line of any instance, including
    instances whose file appears later. ``None`` after each look that found
    nothing new, so a caller can stop between lines."""
    offsets: dict[Path, int] = {}
    partial: dict[Path, bytes] = {}
    first = True
    while True:
        for path in instance_files(data_dir, fqfn, instance):
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if path not in offsets:
                offsets[path] = 0 if (from_start or not first) else size
            if size < offsets[path]:  # truncated or replaced: start over
                offsets[path] = 0
            if size == offsets[path]:
                continue
            with path.open("rb") as handle:
                handle.seek(offsets[path])
                data = partial.pop(path, b"") + handle.read(size - offsets[path])
            offsets[path] = size
            *complete, rest = data.split(b"\n")
            if rest:
                partial[path] = rest
            for line in complete:
                yield line.decode("utf-8", "replace")
        first = False
        yield None
        time.sleep(poll)
