"""The store's clock: every time sparkfn records (commits, runs, packages) is taken here."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    """The current time, timezone-aware, to the microsecond."""
    return datetime.now(UTC)
