"""Durations in configs: ``0.5``, ``"500ms"``, ``"2s"``, ``"1m"``, ``"1h"``."""

from __future__ import annotations

import re
from typing import Any

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration_seconds(value: Any, field: str) -> float:
    """``0.5``, ``"500ms"``, ``"2s"``, ``"1m"`` → seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            msg = f"{field} {value!r} is not a duration (e.g. 500ms, 2s, 1m)"
            raise ValueError(msg)
        scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
        seconds = float(match.group(1)) * scale
    if seconds < 0:
        msg = f"{field} must not be negative; got {value!r}"
        raise ValueError(msg)
    return seconds
