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

import csv
import json
import os
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import Field, field_validator

from sparkfn.api.connector import END_OF_STREAM, Record, Source, SourceContext, _EndOfStream
from sparkfn.api.errors import ConfigError
from sparkfn.connectors.builtin._config import BuiltinConfig, describe, dumps, parse_configs

PROGRESS_PREFIX = "file-progress-"


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
    records_per_read: int = Field(default=1000, ge=1)
    progress_dir: str | None = None

    @field_validator("format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


@dataclass
class FileRecord(Record):
    """A record read from a file: where it ends, for the progress."""

    file: str = ""
    end_offset: int = 0
    line: int = 0  # the last line of the record


@dataclass
class Position:
    """Where reading a file resumes: after ``line`` lines, at byte ``offset``."""

    offset: int = 0
    line: int = 0


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
        self.current: _OpenFile | None = None

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
        directory = _progress_dir(cfg, context, self.what)
        directory.mkdir(parents=True, exist_ok=True)
        self.progress_file = directory / f"{PROGRESS_PREFIX}{self.instance}.json"
        self.progress = _load_progress(directory)
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
            _write_progress(self.progress_file, self.progress, self._mine)
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
            current = self.current = _OpenFile(path, start, cfg, self.what)
        record = current.next_record()
        if record is None:
            current.close()
            self.current = None
            return None
        self.read_to[key] = Position(record.end_offset, record.line)
        return record


class _OpenFile:
    """One file being read from a position, record by record."""

    def __init__(self, path: Path, start: Position, cfg: FileSourceConfig, what: str) -> None:
        self.key = str(path)
        self.path = path
        self.cfg = cfg
        self.what = what
        self.line = start.line
        self.handle: IO[bytes] = path.open("rb")
        self.start = start
        self.columns: list[str] | None = None
        self.needs_header = cfg.format == "csv" and cfg.header
        if start.offset > 0 and not self.needs_header:
            self.handle.seek(start.offset)

    def close(self) -> None:
        """Close the file."""
        self.handle.close()

    def _read_header(self) -> bool:
        """Read the csv header (from the start, also when resuming); ``False`` if not there yet."""
        self.handle.seek(0)
        self.line = 0
        header = self._raw_record()
        if header is None:
            return False
        self.columns = self._fields(header[0], header[1])
        self.needs_header = False
        if self.start.offset > 0:
            self.handle.seek(self.start.offset)
            self.line = self.start.line
        return True

    def next_record(self) -> FileRecord | None:
        """The next complete record, or ``None`` at the end."""
        if self.needs_header and not self._read_header():
            return None
        while True:
            raw = self._raw_record()
            if raw is None:
                return None
            text, first_line = raw
            if self.cfg.format == "jsonl":
                record = self._json_record(text, first_line)
            else:
                record = self._csv_record(text, first_line)
            if record is not None:
                return record

    def _raw_record(self) -> tuple[str, int] | None:
        """The text of the next record (one line; csv: lines up to balanced quotes)."""
        start = self.handle.tell()
        start_line = self.line
        parts: list[str] = []
        quotes = 0
        while True:
            data = self.handle.readline()
            complete = data.endswith(b"\n")
            if not data or (not complete and self.cfg.watch):
                # The end, or a line still being written: come back for it later.
                if parts and not self.cfg.watch:
                    msg = (
                        f"{self.what}: {self.path}:{start_line + 1}: the file ends inside a "
                        "quoted csv field"
                    )
                    raise ValueError(msg)
                self.handle.seek(start)
                self.line = start_line
                return None
            self.line += 1
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                msg = f"{self.what}: {self.path}:{self.line}: not UTF-8 text: {exc}"
                raise ValueError(msg) from exc
            parts.append(text)
            if self.cfg.format == "csv":
                quotes += text.count(self.cfg.quotechar)
                if quotes % 2 and complete:
                    continue  # a quoted field goes on on the next line
            return "".join(parts), start_line + 1

    def _record(self, value: Any, key: str | None, first_line: int) -> FileRecord:
        return FileRecord(
            value=value,
            key=key,
            sequence_id=first_line,
            source_partition=self.key,
            file=self.key,
            end_offset=self.handle.tell(),
            line=self.line,
        )

    def _json_record(self, text: str, first_line: int) -> FileRecord | None:
        line = text.rstrip("\r\n")
        if not line.strip():
            return None
        try:
            document = json.loads(line)
        except ValueError as exc:
            msg = f"{self.what}: {self.path}:{first_line}: not valid JSON: {exc}"
            raise ValueError(msg) from exc
        key = None
        if self.cfg.key_field is not None and isinstance(document, dict):
            found = document.get(self.cfg.key_field)
            key = None if found is None else _text(found)
        return self._record(line, key, first_line)

    def _csv_record(self, text: str, first_line: int) -> FileRecord | None:
        if not text.strip():
            return None
        fields = self._fields(text, first_line)
        if self.columns is None:
            return self._record(dumps(fields), None, first_line)
        if len(fields) != len(self.columns):
            msg = (
                f"{self.what}: {self.path}:{first_line}: {len(fields)} fields; the header "
                f"has {len(self.columns)}"
            )
            raise ValueError(msg)
        row = dict(zip(self.columns, fields, strict=True))
        key = row.get(self.cfg.key_field) if self.cfg.key_field is not None else None
        return self._record(dumps(row), key, first_line)

    def _fields(self, text: str, first_line: int) -> list[str]:
        try:
            rows = list(
                csv.reader(
                    text.splitlines(keepends=True),
                    delimiter=self.cfg.delimiter,
                    quotechar=self.cfg.quotechar,
                    strict=True,
                )
            )
        except csv.Error as exc:
            msg = f"{self.what}: {self.path}:{first_line}: not valid csv: {exc}"
            raise ValueError(msg) from exc
        return rows[0] if rows else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _progress_dir(cfg: FileSourceConfig, context: SourceContext, what: str) -> Path:
    if cfg.progress_dir is not None:
        return Path(cfg.progress_dir).expanduser().resolve()
    state_dir = getattr(context, "state_dir", None)
    if isinstance(state_dir, Path):
        return state_dir
    msg = f"{what}: configs.progress_dir is needed outside sparkfn's runner (no state directory)"
    raise ConfigError(msg)


def _load_progress(directory: Path) -> dict[str, Position]:
    """Every instance's progress, merged: the furthest position of each file wins."""
    merged: dict[str, Position] = {}
    for path in sorted(directory.glob(f"{PROGRESS_PREFIX}*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            msg = f"file source progress {path} cannot be read: {exc}"
            raise ValueError(msg) from exc
        for key, entry in data.get("files", {}).items():
            found = Position(int(entry["offset"]), int(entry["line"]))
            if key not in merged or found.offset > merged[key].offset:
                merged[key] = found
    return merged


def _write_progress(path: Path, progress: dict[str, Position], mine: Any) -> None:
    """Write this instance's files' progress: temp file, fsync, rename, fsync the directory."""
    data = {
        "version": 1,
        "files": {
            key: {"offset": p.offset, "line": p.line}
            for key, p in sorted(progress.items())
            if mine(key)
        },
    }
    temp = path.with_suffix(".tmp")
    with temp.open("w") as handle:
        json.dump(data, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
