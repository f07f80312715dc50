"""Sensitive connector config fields: which they are, and their values never shown.

A config field is sensitive when its name says it holds a secret
(``password``, ``secret``, ``token``, ``credential``, any case): Redis's
``redisPassword``, a user connector's ``apiToken``. The built-ins' config
definitions mark such fields ``sensitive``, and everything that shows a
connector's ``configs`` (the REST API's ``get``, create and update answers,
hence the CLI and the console; error messages; the logs) shows
:data:`MASK` in place of the value. The password of a URL in any field
(``postgresql://user:PASSWORD@host/db``, the PostgreSQL connectors' ``url``)
is masked the same way, the rest of the URL shown.

An update may send a config it read back, masks included: a sensitive field
whose value is :data:`MASK` keeps the value stored before (the user did not
change it). A mask with nothing stored under its field is a
:class:`~sparkfn.api.errors.ConfigError`: the mask is never kept as a secret.

>>> masked({"redisHost": "r", "redisPassword": "hunter2"})
{'redisHost': 'r', 'redisPassword': '********'}
>>> unmasked({"redisPassword": MASK}, {"redisPassword": "hunter2"}, "sink a/b/c")
{'redisPassword': 'hunter2'}
>>> masked({"url": "postgresql://app:hunter2@db:5432/orders"})
{'url': 'postgresql://app:********@db:5432/orders'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sparkfn.api.errors import ConfigError

MASK = "********"
"""What is shown in place of a sensitive field's value."""

_MARKERS = ("password", "secret", "token", "credential")
# scheme://user:PASSWORD@rest: the password is what sits between the first ':' after
# the user and the last '@' before the host.
_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://[^/@:]*:)([^/]*)(@[^@]*)$", re.DOTALL)


def is_sensitive(field: str) -> bool:
    """Whether the config field named ``field`` holds a secret."""
    lowered = field.lower()
    return any(marker in lowered for marker in _MARKERS)


def masked(configs: Mapping[str, Any], *, every: bool = False) -> dict[str, Any]:
    """``configs`` with each sensitive field's value (at any depth) replaced by :data:`MASK`,
    and each URL's password; with ``every``, each value (Pulsar's ``secrets`` map, whose
    values a clear-text secrets provider hands out as they are)."""
    if every:
        return {key: None if value is None else MASK for key, value in configs.items()}
    return {key: _masked_value(key, value) for key, value in configs.items()}


def _masked_value(key: str, value: Any) -> Any:
    if value is None:
        return None
    if is_sensitive(key):
        return MASK
    if isinstance(value, Mapping):
        return masked(value)
    if isinstance(value, str):
        found = _URL_PASSWORD.match(value)
        if found is not None and found.group(2):
            return f"{found.group(1)}{MASK}{found.group(3)}"
    return value


def unmasked(
    given: Mapping[str, Any],
    kept: Mapping[str, Any],
    what: str,
    *,
    field: str = "configs",
    every: bool = False,
) -> dict[str, Any]:
    """``given`` with each :data:`MASK` under a sensitive field (any field, with ``every``)
    replaced by ``kept``'s value.

    ``what`` and ``field`` name the connector and the map for the
    :class:`ConfigError` of a mask with no stored value under its key.
    """
    out: dict[str, Any] = {}
    for key, value in given.items():
        before = kept.get(key)
        if isinstance(value, Mapping):
            inner = before if isinstance(before, Mapping) else {}
            out[key] = unmasked(value, inner, what, field=f"{field}.{key}", every=every)
        elif isinstance(value, str) and not is_sensitive(key) and _has_masked_password(value):
            # A URL read back with its password masked: the stored URL, if that is the one.
            if not (isinstance(before, str) and _masked_value(key, before) == value):
                msg = (
                    f"{what}: {field}.{key} holds the mask {MASK!r} but is not the stored "
                    "value read back; give the password itself"
                )
                raise ConfigError(msg)
            out[key] = before
        elif value == MASK and (every or is_sensitive(key)):
            if before is None:
                msg = (
                    f"{what}: {field}.{key} is the mask {MASK!r} but no value is stored "
                    "under it; give the secret itself"
                )
                raise ConfigError(msg)
            out[key] = before
        else:
            out[key] = value
    return out


def has_url_password(value: str) -> bool:
    """Whether ``value`` is a URL with a password in it (``scheme://user:PASSWORD@host``)."""
    found = _URL_PASSWORD.match(value)
    return found is not None and bool(found.group(2))


def _has_masked_password(value: str) -> bool:
    found = _URL_PASSWORD.match(value)
    return found is not None and found.group(2) == MASK
