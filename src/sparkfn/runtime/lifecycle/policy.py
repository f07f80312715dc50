"""The failure policy as a pure decision (DESIGN.md 2.3, "Uncaught failures").

>>> policy = FailurePolicy(max_restarts=2, restart_window=60)
>>> decide(failure, policy, RestartHistory(times=(10.0, 20.0), now=30.0)).response
<Response.SHUTDOWN_FUNCTION: 'SHUTDOWN_FUNCTION'>

:func:`decide` does no I/O and reads no clock: the caller passes the restart
history with the current time, and the handler already loaded
(:func:`load_handler`). Whatever the handler does is the handler's business;
if it raises or returns something that is not a :class:`Response`, the
policy's default applies and :attr:`Decision.handler_error` says why.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import FailureInfo, Response
from sparkfn.config.policy import FailurePolicy

_LOG = logging.getLogger("sparkfn.supervisor")

Handler = Callable[[FunctionFailure, FailureInfo], Any]


@dataclass(frozen=True)
class RestartHistory:
    """When the run was restarted by the policy (monotonic seconds), and the time now."""

    times: tuple[float, ...] = ()
    now: float = 0.0

    def within(self, window: float) -> tuple[float, ...]:
        """The restarts less than ``window`` seconds before ``now``."""
        return tuple(t for t in self.times if self.now - t <= window)

    def restarted(self, at: float, window: float) -> RestartHistory:
        """The history after a restart at ``at`` (restarts outside ``window`` forgotten)."""
        kept = tuple(t for t in self.times if at - t <= window)
        return RestartHistory((*kept, at), at)


@dataclass(frozen=True)
class Decision:
    """What to do about a death.

    ``chosen`` is what the policy or its handler answered; ``response`` what
    applies: ``SHUTDOWN_FUNCTION`` instead of ``REPLACE_INSTANCE`` once
    ``max_restarts`` restarts happened within ``restart_window``
    (``escalated``), or while the run is stopping.
    """

    response: Response
    chosen: Response
    delay: float = 0.0  # REPLACE_INSTANCE: seconds to wait before the restart
    escalated: bool = False
    handler_error: str | None = None


def decide(
    failure: FunctionFailure,
    policy: FailurePolicy,
    history: RestartHistory,
    *,
    instance_ids: Sequence[int] = (),
    parallelism: int = 1,
    handler: Handler | None = None,
    stopping: bool = False,
) -> Decision:
    """The response to ``failure`` under ``policy``, given the restarts in ``history``."""
    default = policy.on_fatal if failure.fatal else policy.on_failure
    recent = history.within(policy.restart_window)
    chosen, error = default, None
    if handler is not None:
        info = FailureInfo(
            failure.fqfn, list(instance_ids), failure.fatal, len(recent), parallelism
        )
        try:
            chosen = Response(handler(failure, info))
        except Exception as exc:  # user code: its failure must not stop the policy
            error = f"failure handler failed ({type(exc).__name__}: {exc}); applying {default}"
    if stopping:
        return Decision(Response.SHUTDOWN_FUNCTION, chosen, handler_error=error)
    if chosen is not Response.REPLACE_INSTANCE:
        return Decision(chosen, chosen, handler_error=error)
    if len(recent) >= policy.max_restarts:
        return Decision(Response.SHUTDOWN_FUNCTION, chosen, escalated=True, handler_error=error)
    return Decision(chosen, chosen, delay=policy.backoff(len(recent)), handler_error=error)


def load_handler(spec: str, py: str | None) -> Handler:
    """Import a failure handler ``module:callable`` (next to the function's file too)."""
    module_name, _, attr = spec.partition(":")
    if py:
        folder = str(Path(py).resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module = importlib.import_module(module_name)
    handler = getattr(module, attr)
    if not callable(handler):
        msg = f"failure handler {spec} is not callable"
        raise TypeError(msg)
    return handler  # type: ignore[no-any-return]


def policy_handler(policy: FailurePolicy, py: str | None, owner: str) -> Handler | None:
    """The policy's failure handler, or ``None`` (none set, or it cannot be loaded: logged)."""
    if policy.handler is None:
        return None
    try:
        return load_handler(policy.handler, py)
    except Exception:
        _LOG.exception("%s: failure handler %s cannot be loaded", owner, policy.handler)
        return None
