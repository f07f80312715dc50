"""Reading one file of the ``file`` source, record by record, from a position.

:class:`OpenFile` reads JSON lines (one document per line, the line as
written is the value) or CSV rows (a quoted field may span lines; with a
header, each row is a JSON object ``{column: text}``, else a JSON array)
and hands out records (:class:`FileRecord`) that say where they end, so the source
can move its progress past them. A last line without its newline is only
read once it is complete when the source watches the file.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sparkfn.api.connector import Record
from sparkfn.connectors.builtin._config import dumps
from sparkfn.connectors.builtin.file_progress import Position

if TYPE_CHECKING:
    from sparkfn.connectors.builtin.file_source import FileSourceConfig


@dataclass
class FileRecord(Record):
    """A record read from a file: where it ends, for the progress."""

    file: str = ""
    end_offset: int = 0
    line: int = 0  # the last line of the record


class OpenFile:
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
