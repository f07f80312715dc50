"""Secrets: how ``context.get_secret`` resolves a function's (or connector's) secret specs."""

from __future__ import annotations

import os
from pathlib import Path


def resolve_secret(spec: str) -> str | None:
    """``env:VAR`` or ``VAR`` → the environment; ``file:PATH#key`` → a key of a JSON/YAML file.

    >>> resolve_secret("env:HOME") == os.environ.get("HOME")
    True
    """
    if spec.startswith("file:"):
        path, _, key = spec[5:].partition("#")
        import yaml

        data = yaml.safe_load(Path(path).read_text())
        if not key:
            return str(data)
        value = data.get(key) if isinstance(data, dict) else None
        return None if value is None else str(value)
    return os.environ.get(spec.removeprefix("env:"))
