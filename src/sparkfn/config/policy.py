"""The failure policy of a function or connector (KIP-671 responses, DESIGN.md 2.3).

>>> FailurePolicy(on_failure="REPLACE_INSTANCE", max_restarts=3, restart_window="5m")

Failures (an uncaught error, a failing connector, a crashed worker) get
``on_failure`` (default ``REPLACE_INSTANCE``); ``context.fatal`` gets
``on_fatal`` (default ``SHUTDOWN_FUNCTION``). A ``handler`` named
``module:callable`` decides instead: ``handle(failure, info) -> Response``.
``REPLACE_INSTANCE`` restarts with exponential backoff
(``backoff_initial * backoff_multiplier ** n``, at most ``backoff_max``); more
than ``max_restarts`` restarts within ``restart_window`` escalate to
``SHUTDOWN_FUNCTION``.

Its keys read in snake_case or in camelCase (``maxRestarts``), as a
function config's own do.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sparkfn.api.lifecycle import Response
from sparkfn.config.durations import parse_duration_seconds
from sparkfn.config.reading import snake

_HANDLER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class FailurePolicy(BaseModel):
    """What happens after an instance dies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    on_failure: Response = Response.REPLACE_INSTANCE
    on_fatal: Response = Response.SHUTDOWN_FUNCTION
    handler: str | None = None
    max_restarts: int = Field(default=5, ge=0, strict=True)
    restart_window: float = 300.0
    backoff_initial: float = 1.0
    backoff_multiplier: float = Field(default=2.0, ge=1.0)
    backoff_max: float = 60.0
    # How long stop waits for every user object to be closed before naming
    # the ones that were not.
    close_timeout: float = 30.0

    @model_validator(mode="before")
    @classmethod
    def _snake_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        spelt: dict[str, str] = {}
        for raw, value in data.items():
            key = snake(str(raw))
            if key in out and out[key] != value:
                msg = f"{spelt[key]} and {raw} are one field; give one"
                raise ValueError(msg)
            out[key], spelt[key] = value, str(raw)
        return out

    @field_validator("on_failure", "on_fatal", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator(
        "restart_window", "backoff_initial", "backoff_max", "close_timeout", mode="before"
    )
    @classmethod
    def _duration(cls, value: Any, info: Any) -> float:
        return parse_duration_seconds(value, info.field_name)

    @field_validator("handler")
    @classmethod
    def _check_handler(cls, value: str | None) -> str | None:
        if value is not None and not _HANDLER.match(value):
            msg = f"handler {value!r} must be module:callable"
            raise ValueError(msg)
        return value

    def outage_covered(self) -> float:
        """Seconds of backoff before ``REPLACE_INSTANCE`` escalates, when each new instance
        fails at once (a broker still down): the sum of the ``max_restarts`` backoffs."""
        return sum(self.backoff(n) for n in range(self.max_restarts))

    def backoff(self, restarts: int) -> float:
        """Seconds to wait before restart number ``restarts + 1``."""
        return float(
            min(self.backoff_max, self.backoff_initial * self.backoff_multiplier**restarts)
        )


# A connector's default restarts (docs/connectors.md, a broker restart): one more
# than a function's, so that the backoffs (1, 2, 4, 8, 16, 32 s) wait out about
# 63 s of broker outage. A RabbitMQ restart takes 23 to 35 s; five restarts
# (31 s) ran out on a normal one.
CONNECTOR_MAX_RESTARTS = 6


def connector_failure_policy() -> FailurePolicy:
    """A source's or sink's default failure policy (see :data:`CONNECTOR_MAX_RESTARTS`)."""
    return FailurePolicy(max_restarts=CONNECTOR_MAX_RESTARTS)
