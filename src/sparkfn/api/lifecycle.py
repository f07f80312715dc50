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
function by its ``failure_policy`` or by a handler ``module:callable``, which
gets the death as a :class:`~sparkfn.api.errors.FunctionFailure`::

    def handle(failure: FunctionFailure, info: FailureInfo) -> Response:
        return Response.SHUTDOWN_INSTANCE if info.restarts > 3 else Response.REPLACE_INSTANCE
"""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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


class StopMode(StrEnum):
    """How a stop request ends a function, sink or source (DESIGN.md 2.3)."""

    DRAIN = "drain"  # finish the input present now, GracefulShutdown, close; STOPPED
    SUSPEND = "suspend"  # admit nothing more, commit what is in flight, GracefulShutdown; SUSPENDED
    CANCEL = "cancel"  # stop now; what is in flight is abandoned; close only; STOPPED

    @classmethod
    def parse(cls, mode: str | StopMode) -> StopMode:
        """``drain``, ``suspend`` or ``cancel`` (any case); ``ValueError`` naming the choices."""
        try:
            return cls(str(mode).strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            msg = f"stop mode {mode!r} is not one of: {choices}"
            raise ValueError(msg) from None


class RunState(StrEnum):
    """Where a function, sink or source (or one instance of it) is in its life.

    ``CREATED -> STARTING -> RUNNING -> (RESTARTING | PARKED) -> STOPPING ->
    STOPPED | SUSPENDED | ERROR``; the last three are final. ``PARKED`` is a
    run's only (an idle function's query stopped until input arrives; its
    instances stay ``RUNNING``). The values are what the store keeps and
    ``status`` shows.
    """

    CREATED = "CREATED"  # known, never started
    STARTING = "STARTING"  # a start was asked: the query or the instance threads are coming up
    RUNNING = "RUNNING"  # taking input
    RESTARTING = "RESTARTING"  # died; the failure policy restarts it after a backoff
    STOPPING = "STOPPING"  # a stop, the end of the input or a death: winding down
    STOPPED = "STOPPED"  # drained or cancelled; every object closed (or named as not)
    SUSPENDED = "SUSPENDED"  # suspended at a savepoint; a start resumes there
    ERROR = "ERROR"  # died and the policy shut it down; status shows the cause
    PARKED = "PARKED"  # idle: its query is stopped until input arrives; nothing is closed

    @property
    def final(self) -> bool:
        """Whether nothing runs in this state (until a user starts it again)."""
        return self in (RunState.STOPPED, RunState.SUSPENDED, RunState.ERROR)


class Response(StrEnum):
    """What sparkfn does after a function (or connector) instance dies (KIP-671)."""

    REPLACE_INSTANCE = "REPLACE_INSTANCE"  # restart from the checkpoint, with backoff
    SHUTDOWN_INSTANCE = "SHUTDOWN_INSTANCE"  # stop the failed instance only
    SHUTDOWN_WORKER = "SHUTDOWN_WORKER"  # stop every function on this worker
    SHUTDOWN_FUNCTION = "SHUTDOWN_FUNCTION"  # stop all instances, persist ERROR


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


@dataclass(frozen=True)
class FailureInfo:
    """What a failure handler knows besides the exception."""

    fqfn: str
    instance_ids: list[int]
    fatal: bool
    restarts: int  # restarts within the current window
    parallelism: int
    extra: dict[str, Any] = field(default_factory=dict)
