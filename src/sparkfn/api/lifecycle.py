"""Lifecycle hooks and failure responses (DESIGN.md 2.3).

A function or connector that wants a say in *graceful* termination (drain,
suspend) implements :class:`GracefulShutdown`::

    class Batcher(Function, GracefulShutdown):
        def process(self, input, context):
            self.pending.append(input)
        def prepare_to_shutdown(self):
            return "\\n".join(self.pending)     # committed with the final batch
        def shutdown(self):
            self.pool.shutdown(wait=True)

Neither is called on cancel, failure or ``context.fatal``; both may be called
more than once and must be idempotent.

What happens after an uncaught failure is a :class:`Response`, chosen per
function by its ``failure_policy`` or by a handler ``module:callable``::

    def handle(failure: FunctionFailure, info: FailureInfo) -> Response:
        return Response.SHUTDOWN_INSTANCE if info.restarts > 3 else Response.REPLACE_INSTANCE
"""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sparkfn.api.errors import SparkfnError


class GracefulShutdown(ABC):
    """FLIP-46 hooks, called only when a function or connector ends gracefully.

    Order on drain and suspend: ``prepare_to_shutdown()`` (inside the final
    end-of-stream batch for functions, so what it returns or publishes
    commits with the final checkpoint), then ``shutdown()``, then ``close()``.
    """

    @abstractmethod
    def prepare_to_shutdown(self) -> Any:
        """Flush what is buffered. A function may return outputs (a value or a list)."""

    @abstractmethod
    def shutdown(self) -> None:
        """Release what the object runs (threads, pools); ``close()`` follows."""


class Response(StrEnum):
    """What sparkfn does after a function (or connector) instance dies (KIP-671)."""

    REPLACE_INSTANCE = "REPLACE_INSTANCE"  # restart from the checkpoint, with backoff
    SHUTDOWN_INSTANCE = "SHUTDOWN_INSTANCE"  # stop the failed instance only
    SHUTDOWN_WORKER = "SHUTDOWN_WORKER"  # stop every function on this worker
    SHUTDOWN_FUNCTION = "SHUTDOWN_FUNCTION"  # stop all instances, persist ERROR


class FatalError(SparkfnError, RuntimeError):
    """Raised in a task whose instance was terminated by ``context.fatal``."""

    reason = "fatal"


@dataclass(frozen=True)
class DeathCause:
    """Why an instance died, as stored and shown by status.

    ``origin`` says where it came from: ``"fatal"`` (``context.fatal``),
    ``"connector"``, ``"failure"`` (an uncaught error), plus the thread name.
    """

    type: str
    message: str
    traceback: str = ""
    origin: str = ""
    thread: str = ""

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    @classmethod
    def from_exception(cls, exc: BaseException, origin: str, thread: str) -> DeathCause:
        """The stored form of ``exc``, raised or reported in ``thread``."""
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(type(exc).__name__, str(exc), text, origin, thread)


class FunctionFailure(SparkfnError, RuntimeError):
    """The exception a failure handler receives: an instance's death, rebuilt from the store."""

    reason = "function_failed"

    def __init__(self, fqfn: str, instance_id: int | None, cause: DeathCause, fatal: bool) -> None:
        where = f"instance {instance_id}" if instance_id is not None else "all instances"
        super().__init__(f"function {fqfn} ({where}): {cause}")
        self.fqfn = fqfn
        self.instance_id = instance_id
        self.cause = cause
        self.fatal = fatal


@dataclass(frozen=True)
class FailureInfo:
    """What a failure handler knows besides the exception."""

    fqfn: str
    instance_ids: list[int]
    fatal: bool
    restarts: int  # restarts within the current window
    parallelism: int
    extra: dict[str, Any] = field(default_factory=dict)
