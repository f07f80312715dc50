"""Reading the ``sparkfn`` data source's options: typed values or a clear error.

Spark hands a data source its options as strings, with lower-cased names;
these turn one into the value the reader needs, naming the option and what
was found when it is not one.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkfn.api.errors import ConfigError


def positive_int(opts: Mapping[str, str], name: str, default: int | None) -> int | None:
    """Option ``name`` as a positive integer, ``default`` when absent."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        msg = f"sparkfn data source option {name} must be a positive integer; got {raw!r}"
        raise ConfigError(msg)
    return value


def choice(opts: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    """Option ``name`` as one of ``choices`` (any case), ``default`` when absent."""
    value = opts.get(name.lower(), default).strip().lower()
    if value not in choices:
        what = " or ".join(choices) if len(choices) == 2 else f"one of {', '.join(choices)}"
        msg = f"sparkfn data source option {name} must be {what}; got {value!r}"
        raise ConfigError(msg)
    return value
