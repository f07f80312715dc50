"""What every part of a :class:`~.supervisor.Supervisor` shares: its run, its state, its end.

:class:`SupervisorCore` holds the supervisor's attributes and the moves its
parts make together: its own state's move (:meth:`~SupervisorCore._move`,
checked by the run's table), the stored record's moves, the end of the run
and the close of its objects, and :meth:`~SupervisorCore._defect`, the end
of a run whose move the state machine refused. The failure policy's
responses are in :mod:`.failures`, one instance's stop in :mod:`.leaving`,
the supervisor's thread and the run's start and stop in :mod:`.supervisor`.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import DeathCause, RunState, StopMode
from sparkfn.config.policy import FailurePolicy
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.poison import PoisonHunter
from sparkfn.runtime.lifecycle.policy import RestartHistory
from sparkfn.runtime.lifecycle.states import (
    INSTANCE_TRANSITIONS,
    RUN_TRANSITIONS,
    IllegalTransition,
    can_move,
    transition,
)
from sparkfn.runtime.lifecycle.target import RunTarget
from sparkfn.store.store import Store

_LOG = logging.getLogger("sparkfn.supervisor")


@dataclass
class Leave:
    """One instance's graceful stop, asked and not yet complete (:mod:`.leaving`).

    ``point`` is where a drain ends (the input's ends when it was asked);
    ``batch`` is set once the instance takes no more input: the batch it may
    still be in (:meth:`~.target.RunTarget.begin_leave`).
    """

    mode: StopMode
    point: Any
    cause: str
    begun: bool = False
    batch: Any = None


class SupervisorCore:
    """The state and the shared moves of one run's supervisor (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        target: RunTarget,
        policy: FailurePolicy,
        *,
        control_id: str,
        py: str | None = None,
        on_worker_shutdown: Callable[[FunctionFailure], None] | None = None,
        hunter: PoisonHunter | None = None,
    ) -> None:
        self.store = store
        # Looks for a message that kills its Python worker before the policy applies (functions).
        self.hunter = hunter
        self.target = target
        self.policy = policy
        self.control_id = control_id
        self.fqfn = target.name
        self.py = py
        self.on_worker_shutdown = on_worker_shutdown
        self.epoch = 0
        self.state = RunState.CREATED
        self.unclosed: list[str] = []
        self.failure: FunctionFailure | None = None
        self.history = RestartHistory()
        self._stopping: StopMode | None = None  # the stop being carried out
        self._requested: tuple[StopMode, Any, str] | None = None  # the latest stop asked
        self._leaving: dict[int, Leave] = {}  # instances stopping gracefully, one by one
        self._request_lock = threading.Lock()
        self._lock = threading.RLock()  # one move at a time
        self._wake = threading.Event()
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> StopMode | None:
        """The stop being carried out or asked for (``None`` while it runs)."""
        requested = self._requested
        return self._stopping or (requested[0] if requested is not None else None)

    def wake(self) -> None:
        """Make the supervisor look now (its target ended, or something else changed)."""
        self._wake.set()

    def _all(self) -> list[int]:
        return list(range(self.target.parallelism))

    # --- moves ------------------------------------------------------------------------
    def _move(self, state: RunState) -> None:
        self.state = transition(
            self.state, state, RUN_TRANSITIONS, f"{self.target.kind} {self.fqfn}"
        )

    def _set_all(self, state: str, cause: str, instances: list[int] | None = None) -> None:
        """The run and these instances (default: all) to ``state``, in one transaction.

        When the run ends (``STOPPED``, ``SUSPENDED``, ``ERROR``), an instance
        that ended before it in another state (stopped alone, shut down) keeps
        its own end: :func:`~.control.set_state`'s ``keep_other_ends``, whose
        kept records need nothing more. Other moves (``RESTARTING``) move
        every one named.
        """
        ids = [control.FUNCTION, *(instances if instances is not None else self._all())]
        ending = state in control.ENDED
        control.set_state(self.store, self.control_id, state, cause, ids, keep_other_ends=ending)

    def _shut_down(self, failed: list[int], cause: str) -> None:
        """The run and its failed instances in ERROR, the others cancelled (STOPPED);
        an instance that ended already (stopped alone, shut down) keeps its end."""
        self._set_all(control.ERROR, cause, failed)
        others = [i for i in self._all() if i not in failed]
        if others:
            cancelled = f"cancelled: {cause}"
            control.set_state(
                self.store,
                self.control_id,
                control.STOPPED,
                cancelled,
                others,
                keep_other_ends=True,
            )

    # --- the end ----------------------------------------------------------------------
    def _end(self, mode: StopMode, cause: str, *, graceful: bool) -> None:
        """The target is stopped or stopping: close every object and record the final state."""
        self.target.halt()
        self._close(self._all(), graceful=graceful)
        with self._request_lock:
            self._leaving.clear()  # an instance stopping alone ends with the run
        control.clear_stop(self.store, self.control_id)
        # The record passes through STOPPING as the run did (a target that stops at
        # once never asked the reader to stop, which records it).
        control.set_state(self.store, self.control_id, control.STOPPING, cause)
        state = control.SUSPENDED if mode is StopMode.SUSPEND else control.STOPPED
        # One transaction: a status read never sees the function stopped and its
        # instances running. Instances already ended (in ERROR, or stopped alone)
        # keep their state and cause.
        ids = [control.FUNCTION, *self._all()]
        control.set_state(self.store, self.control_id, state, cause, ids, keep_ended=True)
        self._finish(RunState(state))

    def _finish(self, state: RunState) -> None:
        self._move(RunState.STOPPING if state is not RunState.ERROR else state)
        self._move(state)
        self._ended.set()

    def _close(self, instances: list[int], *, graceful: bool) -> None:
        left = self.target.close(
            instances, graceful=graceful, epoch=self.epoch, timeout=self.policy.close_timeout
        )
        if left:
            self.unclosed = left
            _LOG.warning(
                "%s %s: objects not closed within %.0f s: %s",
                self.target.kind,
                self.fqfn,
                self.policy.close_timeout,
                "; ".join(left),
            )

    def _defect(self, exc: IllegalTransition) -> None:
        """A move the state machine refused: a defect in sparkfn, never retried.

        Doing the step again would be refused again, so the run ends in
        ``ERROR`` with the refusal as its cause (in its status and its
        record, where the record's own state allows ``ERROR``): the target
        is cancelled and its objects closed.
        """
        kind, name = self.target.kind, self.fqfn
        _LOG.error("%s %s: %s; the run ends in ERROR", kind, name, exc, exc_info=exc)
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        thread = threading.current_thread().name
        cause = DeathCause(type(exc).__name__, str(exc), text, "supervisor", thread)
        self.failure = FunctionFailure(self.fqfn, None, cause, False)
        try:
            try:  # a stop's own record may be refused too (the same defect): it is said here
                self.target.cancel(f"defect: {exc}", self.epoch)
                self._close(self._all(), graceful=False)
            except Exception:
                _LOG.exception("%s %s: stopping after the refused move failed", kind, name)
            try:
                self._record_defect(f"defect: {exc}")
            except Exception:
                _LOG.exception("%s %s: recording the end after the refused move failed", kind, name)
        finally:  # the run ends all the same: nobody waits for it for ever
            if can_move(self.state, RunState.ERROR):
                self._move(RunState.ERROR)
            self._ended.set()

    def _record_defect(self, cause: str) -> None:
        """``ERROR`` in the record for what may move there; the records the refusal
        found wrong are left as they were (they show where the defect is)."""
        record = control.read_control(self.store, self.control_id)
        if record is None:
            return
        ids = [
            i
            for i, r in record.instances.items()
            if can_move(RunState(r.state), RunState.ERROR, INSTANCE_TRANSITIONS)
        ]
        if can_move(RunState(record.state), RunState.ERROR):
            ids.insert(0, control.FUNCTION)
        control.set_state(self.store, self.control_id, control.ERROR, cause, ids)
