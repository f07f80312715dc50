"""The one duration grammar of sparkfn: configs, YAML files and CLI flags.

A duration is one or more whole numbers, each with a unit, summed::

    duration := term+            500ms   2s   30m   12h   7d   2w   1h30m   1h 30m
    term     := digits unit
    unit     := ms | s | m | h | d | w      (any case)

A config field measured in seconds (``trigger_interval``, ``batch_timeout``,
``restart_window``, ...) also takes a plain number of seconds, a YAML number
or its text: ``0.5``, ``"2"``. A command-line option whose unit would be a
guess (``--retention 7``: seconds? days?) asks for a unit instead.

>>> parse_duration("1h30m")
datetime.timedelta(seconds=5400)
>>> parse_duration_seconds("500ms", "trigger_interval")
0.5
>>> format_duration(timedelta(days=7))
'7d'
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

# Largest first: format_duration picks the first that divides evenly.
UNITS = {
    "w": timedelta(weeks=1),
    "d": timedelta(days=1),
    "h": timedelta(hours=1),
    "m": timedelta(minutes=1),
    "s": timedelta(seconds=1),
    "ms": timedelta(milliseconds=1),
}
_TERM = re.compile(r"\s*(\d+)\s*(ms|[wdhms])", re.IGNORECASE)
_TERMS = re.compile(rf"(?:{_TERM.pattern})+\s*", re.IGNORECASE)
_SECONDS = re.compile(r"\s*\d+(?:\.\d*)?\s*|\s*\.\d+\s*")
EXAMPLES = "e.g. 500ms, 2s, 30m, 12h, 7d or 1h30m"


def parse_duration(text: str, *, bare_seconds: bool = False) -> timedelta:
    """The duration ``text`` spells; a plain number is seconds when ``bare_seconds``.

    Raises ``ValueError`` quoting ``text`` and the grammar. Zero is a
    duration; whether it is allowed is the caller's rule.
    """
    if _TERMS.fullmatch(text):
        return sum(
            (int(number) * UNITS[unit.lower()] for number, unit in _TERM.findall(text)),
            timedelta(),
        )
    if bare_seconds and _SECONDS.fullmatch(text):
        return timedelta(seconds=float(text))
    plain = "a number of seconds or " if bare_seconds else ""
    msg = (
        f"{text!r} is not a duration; use {plain}whole numbers with a unit "
        f"(ms, s, m, h, d, w), {EXAMPLES}"
    )
    raise ValueError(msg)


def parse_duration_seconds(value: Any, field: str) -> float:
    """A config field's duration in seconds: a number (seconds) or a duration text.

    For pydantic validators: raises ``ValueError`` naming ``field``.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, timedelta):
        seconds = value.total_seconds()
    else:
        try:
            seconds = parse_duration(str(value), bare_seconds=True).total_seconds()
        except ValueError as exc:
            msg = f"{field}: {exc}"
            raise ValueError(msg) from None
    if seconds < 0:
        msg = f"{field} must not be negative; got {value!r}"
        raise ValueError(msg)
    return seconds


def format_duration(duration: timedelta) -> str:
    """``duration`` in the largest unit that holds it whole, e.g. ``7d``.

    Whole milliseconds parse back to the same duration. Days are the largest
    unit shown: ``14d`` reads better than ``2w``.
    """
    for unit, size in UNITS.items():
        if unit != "w" and duration % size == timedelta(0):
            return f"{duration // size}{unit}"
    return f"{duration.total_seconds() * 1000:g}ms"
