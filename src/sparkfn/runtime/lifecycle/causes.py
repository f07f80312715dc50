"""The user-facing part of an error's text."""

from __future__ import annotations


def short_error(text: str) -> str:
    """The user-facing part of a Spark error: sparkfn's message if it is in there."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("sparkfn.", "function ")) or "Error: function " in stripped:
            return stripped
    # A Python worker's failure: its exception is the first unindented line
    # after the frames of the last traceback ("RuntimeError: db unreachable").
    _, marker, frames = text.rpartition("Traceback (most recent call last):")
    if marker:
        for line in frames.splitlines()[1:]:
            if line.strip() and not line[0].isspace():
                return line.strip()
    first = text.strip().splitlines()
    return first[0] if first else text
