"""Sensitive connector config fields: which they are, and their values never shown.

A config field is sensitive when its name says it holds a secret
(``password``, ``secret``, ``token``, ``credential``, any case): Redis's
``redisPassword``, a user connector's ``apiToken``. The built-ins' config
definitions mark such fields ``sensitive``, and everything that shows a
connector's ``configs`` (the REST API's ``get``, create and update answers,
hence the CLI and the console; error messages; the logs) shows
:data:`MASK` in place of the value.

An update may send a config it read back, masks included: a sensitive field
whose value is :data:`MASK` keeps the value stored before (the user did not
change it). A mask with nothing stored under its field is a
:class:`~sparkfn.api.errors.ConfigError`: the mask is never kept as a secret.

>>> masked({"redisHost": "r", "redisPassword": "hunter2"})
{'redisHost': 'r', 'redisPassword': '********'}
>>> unmasked({"redisPassword": MASK}, {"redisPassword": "hunter2"}, "sink a/b/c")
{'redisPassword': 'hunter2'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkfn.api.errors import ConfigError

MASK = "********"
"""What is shown in place of a sensitive field's value."""

_MARKERS = ("password", "secret", "token", "credential")


def is_sensitive(field: str) -> bool:
    """Whether the config field named ``field`` holds a secret."""
    lowered = field.lower()
    return any(marker in lowered for marker in _MARKERS)


def masked(configs: Mapping[str, Any]) -> dict[str, Any]:
    """``configs`` with each sensitive field's value (at any depth) replaced by :data:`MASK`."""
    return {
        key: MASK
        if is_sensitive(key) and value is not None
        else masked(value)
        if isinstance(value, Mapping)
        else value
        for key, value in configs.items()
    }


def unmasked(given: Mapping[str, Any], kept: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``given`` with each :data:`MASK` under a sensitive field replaced by ``kept``'s value.

    ``what`` names the connector for the :class:`ConfigError` of a mask with
    no stored value under its field.
    """
    out: dict[str, Any] = {}
    for key, value in given.items():
        before = kept.get(key)
        if isinstance(value, Mapping):
            out[key] = unmasked(value, before if isinstance(before, Mapping) else {}, what)
        elif value == MASK and is_sensitive(key):
            if before is None:
                msg = (
                    f"{what}: configs.{key} is the mask {MASK!r} but no value is stored "
                    "under it; give the secret itself"
                )
                raise ConfigError(msg)
            out[key] = before
        else:
            out[key] = value
    return out
