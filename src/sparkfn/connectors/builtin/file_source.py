"""``file``: JSON lines or CSV from a file or a directory, resumable.

::

    sparkfn sources localrun --source-type file --output raw \\
        --source-config '{"path": "/data/in", "format": "csv", "glob": "*.csv"}'

configs:

``path`` (required)
    A file, or a directory whose files (matching ``glob``) are read in name order.
``format``
    ``jsonl`` (default): one JSON document per line; the record's value is
    the line as written. ``csv``: one record per row, the value a JSON object
    ``{column: text}`` (with ``header``, the default) or a JSON array.
``glob``
    Which files of the directory (default ``*``; ``**/*.csv`` recurses).
    Names starting with ``.`` are skipped.
``watch``
    ``false`` (default): read what is there, then ``END_OF_STREAM`` (a
    drain). ``true``: keep looking for new files and new lines; a last line
    without its newline waits until it is complete.
``key_field``
    The JSON field (jsonl) or column (csv with header) whose text becomes the
    record's key.
``header``, ``delimiter``, ``quotechar``
    For csv: whether the first row names the columns (default ``true``), the
    field separator (default ``,``) and the quote character (default ``"``).
``records_per_read``
    How many records one ``read()`` returns at most (default 1000).
``progress_dir``
    Where progress is kept (default: the source's directory under the data
    directory, ``<data dir>/sources/<tenant>/<namespace>/<name>``).

**Progress.** For every file the source remembers the byte offset and line
number after the last record that was appended, in
``file-progress-<instance>.json`` under ``progress_dir``, written (atomically,
with fsync) in ``commit()``, that is after the records are durably appended.
A restart resumes there. Files are taken to be append-only: a file rewritten
in place is not read again. With parallelism P a file belongs to instance
``crc32(path) % P``; on start an instance reads every instance's progress
file, so changing P resumes too.

**Guarantees.** Records are appended at least once: a crash after an append
and before its ``commit()`` reads those lines again. Under
``effectively_once`` each record carries ``sequence_id`` = its line number
and ``source_partition`` = its file, so those lines are dropped by the store
instead: exactly once.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from sparkfn.api.connector import END_OF_STREAM, Record, Source, SourceContext, _EndOfStream
from sparkfn.api.errors import ConfigError
from sparkfn.connectors.builtin._config import BuiltinConfig, Count, describe, parse_configs
from sparkfn.connectors.builtin.file_progress import (
    PROGRESS_PREFIX,
    Position,
    load_progress,
    progress_dir,
    write_progress,
)
from sparkfn.connectors.builtin.file_reader import FileRecord, OpenFile


class FileSourceConfig(BuiltinConfig):
    """The file source's configs."""

    path: str = Field(min_length=1)
    format: Literal["jsonl", "csv"] = "jsonl"
    glob: str = Field(default="*", min_length=1)
    watch: bool = False
    key_field: str | None = None
    header: bool = True
    delimiter: str = Field(default=",", min_length=1, max_length=1)
    quotechar: str = Field(default='"', min_length=1, max_length=1)
    records_per_read: Count = 1000
    progress_dir: str | None = None

    @field_validator("format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class FileSource(Source):
    """Reads JSON lines or CSV rows from files, remembering how far it got."""

    def __init__(self) -> None:
        self.what = "source (file)"
        self.config: FileSourceConfig | None = None
        self.root = Path()
        self.instance = 0
        self.instances = 1
        self.progress_file: Path | None = None
        self.progress: dict[str, Position] = {}  # appended and acknowledged
        self.read_to: dict[str, Position] = {}  # handed out by read()
        self.dirty = False
        self.current: OpenFile | None = None

    # --- lifecycle ---------------------------------------------------------------

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Validate the configs and load the progress of earlier runs."""
        self.what = describe("source", "file", context)
        cfg = self.config = parse_configs(FileSourceConfig, config, self.what)
        if cfg.key_field is not None and cfg.format == "csv" and not cfg.header:
            msg = f"{self.what}: configs.key_field {cfg.key_field!r} needs configs.header true"
            raise ConfigError(msg)
        self.root = Path(cfg.path).expanduser().resolve()
        if not self.root.exists():
            msg = f"{self.what}: configs.path {cfg.path!r} does not exist"
            raise ConfigError(msg)
        self.instance = context.get_instance_id()
        self.instances = context.get_num_instances()
        directory = progress_dir(cfg, context, self.what)
        directory.mkdir(parents=True, exist_ok=True)
        self.progress_file = directory / f"{PROGRESS_PREFIX}{self.instance}.json"
        self.progress = load_progress(directory)
        self.read_to = {k: Position(p.offset, p.line) for k, p in self.progress.items()}

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """Up to ``records_per_read`` records; ``END_OF_STREAM`` when all is read (no watch)."""
        cfg = self._cfg()
        records: list[Record] = []
        for path in self._files():
            while len(records) < cfg.records_per_read:
                record = self._next(path)
                if record is None:
                    break
                records.append(record)
            if len(records) >= cfg.records_per_read:
                return records
        if records:
            return records
        return None if cfg.watch else END_OF_STREAM

    def ack(self, record: Record) -> None:
        """The record is appended: its file's progress moves past it."""
        if isinstance(record, FileRecord):
            self.progress[record.file] = Position(record.end_offset, record.line)
            self.dirty = True

    def commit(self) -> None:
        """Persist the progress (atomically, durably)."""
        if self.dirty and self.progress_file is not None:
            write_progress(self.progress_file, self.progress, self._mine)
            self.dirty = False

    def close(self) -> None:
        """Close the open file; the progress was written by the last ``commit()``."""
        if self.current is not None:
            self.current.close()
            self.current = None

    # --- reading -----------------------------------------------------------------

    def _cfg(self) -> FileSourceConfig:
        if self.config is None:
            msg = f"{self.what}: read() before open()"
            raise RuntimeError(msg)
        return self.config

    def _mine(self, key: str) -> bool:
        return zlib.crc32(key.encode()) % self.instances == self.instance

    def _files(self) -> Iterator[Path]:
        """This instance's files with something left to read, in name order."""
        cfg = self._cfg()
        if self.root.is_file():
            candidates = [self.root]
        else:
            candidates = sorted(
                p
                for p in self.root.glob(cfg.glob)
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(self.root).parts)
            )
        for path in candidates:
            key = str(path)
            if not self._mine(key):
                continue
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size > self.read_to.get(key, Position()).offset:
                yield path

    def _next(self, path: Path) -> FileRecord | None:
        """The next record of ``path``, or ``None`` at its (current) end."""
        cfg = self._cfg()
        key = str(path)
        current = self.current
        if current is None or current.key != key:
            if current is not None:
                current.close()
            start = self.read_to.get(key, Position())
            current = self.current = OpenFile(path, start, cfg, self.what)
        record = current.next_record()
        if record is None:
            current.close()
            self.current = None
            return None
        self.read_to[key] = Position(record.end_offset, record.line)
        return record
