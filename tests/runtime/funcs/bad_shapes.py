"""Bad-code tests: functions that load but are wrong in some other way."""

from __future__ import annotations

from typing import Any

from sparkfn import Context, Function


def returns_dict(input: Any) -> Any:
    """A dict is not a value for a string topic."""
    return {"text": input}


def returns_set(input: Any) -> Any:
    """A set cannot go to a json topic."""
    return {"tags": {input}}


def three_args(input: Any, context: Any, extra: Any) -> Any:
    """Not a function shape sparkfn knows."""
    return input


class Exploding(Function):
    """Its constructor raises."""

    def __init__(self) -> None:
        msg = "no config file"
        raise RuntimeError(msg)

    def process(self, input: Any, context: Context) -> Any:
        return input


class NoProcess:
    """A class without ``process``."""

    def run(self, input: Any) -> Any:
        return input


NOT_CALLABLE = 42
