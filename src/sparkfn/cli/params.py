"""Parsing and printing the values command-line options take.

>>> parse_duration("1h30m")
datetime.timedelta(seconds=5400)
>>> parse_size("100MB")
104857600
>>> format_duration_ms(7 * 86_400_000), format_size(104857600)
('7d', '100MB')

Parsers raise :class:`typer.BadParameter`, so Typer names the option in the
error ("Invalid value for '--retention': ...").
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import typer

from sparkfn.config import durations

# Powers of 1024, as Pulsar's admin CLI reads sizes; "KB" and "KiB" mean the same.
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|(b))?", re.IGNORECASE)


def parse_duration(text: str) -> timedelta:
    """A positive duration in sparkfn's grammar, with a unit: ``45s``, ``7d``, ``1h30m``.

    The grammar is :mod:`sparkfn.config.durations`; an option's value needs a
    unit (``--retention 7`` could mean seconds or days).
    """
    try:
        duration = durations.parse_duration(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if duration <= timedelta(0):
        msg = f"{text!r}: the duration must be positive"
        raise typer.BadParameter(msg)
    return duration


def parse_size(text: str) -> int:
    """Bytes from ``1GB``, ``100MB``, ``512KiB``, ``64k`` or a plain number of bytes."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        msg = (
            f"{text!r} is not a size; use a number of bytes with an optional unit "
            "(B, KB, MB, GB, TB; powers of 1024), e.g. 1GB or 100MB"
        )
        raise typer.BadParameter(msg)
    number, unit, _ = match.groups()
    size = int(float(number) * _SIZE_UNITS[(unit or "").lower()])
    if size <= 0:
        msg = f"{text!r}: the size must be at least one byte"
        raise typer.BadParameter(msg)
    return size


def parse_event_time(text: str) -> datetime:
    """An ISO 8601 time; one without a UTC offset is taken as UTC."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        msg = f"{text!r} is not an ISO 8601 time, e.g. 2024-05-01T12:00:00Z"
        raise typer.BadParameter(msg) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def parse_properties(items: list[str], option: str = "--property") -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict; the value may be empty or contain ``=``."""
    properties: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            msg = f"{item!r} must have the form KEY=VALUE with a non-empty KEY"
            raise typer.BadParameter(msg, param_hint=f"'{option}'")
        properties[key] = value
    return properties


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive one (SQLite returns those for aware columns) is taken as UTC."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    """A time for people, in UTC to the millisecond: ``2024-05-01 12:00:00.250``."""
    return as_utc(value).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def elapsed(started: float) -> str:
    """``H:MM:SS`` since ``started`` (a ``time.monotonic()`` reading)."""
    seconds = int(time.monotonic() - started)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def format_duration_ms(ms: int | None) -> str:
    """A retention time in milliseconds for people, e.g. ``7d``; ``-`` for none."""
    if ms is None:
        return "-"
    return durations.format_duration(timedelta(milliseconds=ms))


def format_size(size: int | None) -> str:
    """A byte count for people: ``100MB``, ``1.5GB``, ``512B``; ``-`` for none."""
    if size is None:
        return "-"
    for unit in ("t", "g", "m", "k"):
        scale = _SIZE_UNITS[unit]
        if size >= scale:
            value = size / scale
            shown = f"{value:.0f}" if size % scale == 0 else f"{value:.1f}"
            return f"{shown}{unit.upper()}B"
    return f"{size}B"
