"""Enrichment from configuration and secrets.

Each JSON record gets fields from ``user_config`` (``source``, and a ``tag``
made of ``prefix`` and the record's id) and a ``signature``: an HMAC of the
record keyed with a secret. Secrets are named in the function's ``secrets``
map and resolved where the function runs, so their values never appear in
its configuration; ``{"signing_key": "env:ENRICH_SIGNING_KEY"}`` reads the
environment variable ``ENRICH_SIGNING_KEY``.
"""

import hashlib
import hmac
import json
from typing import Any

from sparkfn import Context, Function


def sign(record: dict[str, Any], key: str) -> str:
    """The hex HMAC-SHA256 of ``record`` (canonical JSON) under ``key``."""
    payload = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key.encode(), payload, hashlib.sha256).hexdigest()


class Enrich(Function):
    """Adds configured fields and a signature to each JSON record."""

    def process(self, input: dict[str, Any], context: Context) -> dict[str, Any]:
        """Return ``input`` with ``source``, ``tag`` and ``signature`` added."""
        prefix = context.get_user_config_value("prefix") or ""
        key = context.get_secret("signing_key")
        return {
            **input,
            "source": context.get_user_config_value("source"),
            "tag": f"{prefix}{input.get('id')}",
            "signature": None if key is None else sign(input, key),
        }
