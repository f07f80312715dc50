"""How a supervisor answers a failure: the policy's responses, a lost session, a newer run.

:class:`FailureHandling` is the part of :class:`~.supervisor.Supervisor` that
acts on deaths (DESIGN.md 2.3): close the dead instances' objects, then
apply :func:`~.policy.decide`'s response: ``REPLACE_INSTANCE`` (relaunch
after a backoff, escalating after ``max_restarts`` in ``restart_window``),
``SHUTDOWN_INSTANCE`` (the others keep running), ``SHUTDOWN_FUNCTION`` /
``SHUTDOWN_WORKER`` (stop everything, persist ``ERROR``). Before the policy,
a query failure may be a poison message's (:mod:`.poison`); after it, a
run whose session is gone (:meth:`~FailureHandling.lose`) or whose record a
newer run took (:meth:`~FailureHandling._fenced`) ends in ``ERROR`` without
a policy. Every method runs on the supervisor's thread, under its lock.
"""

from __future__ import annotations

import logging
import threading
import time

from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import DeathCause, Response, RunState, StopMode
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.causes import escalated, failure_of, fenced, user_text
from sparkfn.runtime.lifecycle.policy import RestartHistory, decide, policy_handler
from sparkfn.runtime.lifecycle.supervisor_core import SupervisorCore
from sparkfn.runtime.spark.liveness import SESSION_LOST

_LOG = logging.getLogger("sparkfn.supervisor")


class FailureHandling(SupervisorCore):
    """A supervisor's answers to failures (see the module docstring)."""

    def _fenced(self, newer: int) -> None:
        """A newer run of the same name began: this one stops, and touches its record no more.

        The record, deaths and state now belong to the newer run, and the
        sink refuses this run's commits; a restart here would take the
        function back from it, so the failure policy does not apply.
        """
        self.target.halt()
        self._close(self._all(), graceful=False)
        thread = threading.current_thread().name
        cause = fenced(self.target.kind, self.fqfn, self.epoch, newer, thread)
        self.failure = FunctionFailure(self.fqfn, None, cause, False)
        _LOG.error("%s", cause.message)
        self._finish(RunState.ERROR)

    def lose(self, cause: str) -> None:
        """What the target ran in is gone (its Spark JVM died): end the run in ``ERROR``.

        Called by whoever saw it (a watch of the JVM), from any thread; a run
        that has ended already is left as it is. No failure policy applies:
        nothing can start again in that session. The owner of the session
        (a worker) starts the run again in a new one.
        """
        with self._lock:
            if not self._ended.is_set():
                self._lose(cause)

    def _lose(self, message: str) -> None:
        thread = threading.current_thread().name
        cause = DeathCause(SESSION_LOST, message, "", "spark session", thread)
        record = control.read_control(self.store, self.control_id)
        live = record.live(self.target.parallelism) if record is not None else self._all()
        for i in live:
            control.record_death(
                self.store, self.control_id, i, cause, fatal=False, epoch=self.epoch
            )
        control.mark_handled(self.store, self.control_id, live)
        self.failure = FunctionFailure(self.fqfn, None, cause, False)
        # Said once by whoever saw the JVM die (the worker, localrun's error line): INFO here.
        _LOG.info("%s %s: %s; the run ends", self.target.kind, self.fqfn, message)
        # Its objects lived in the session's Python workers: closed where they still run.
        self._close(self._all(), graceful=False)
        self._set_all(control.ERROR, f"lost: {message}", live)
        self._finish(RunState.ERROR)

    def _hunt(self, error: str) -> bool:
        """A query failure that a message may have caused by killing its worker: start the
        query again to find and pass it (:mod:`.poison`); ``False``: the policy decides."""
        if self.hunter is None or (self._stopping is not None and not self._drain_goes_on()):
            return False
        try:
            why = self.hunter.after_crash(error, self.epoch)
        except Exception:
            _LOG.exception(
                "%s %s: looking for a poison message failed", self.target.kind, self.fqfn
            )
            return False
        if why is None:
            return False
        _LOG.warning("%s %s: %s", self.target.kind, self.fqfn, why)
        self.target.halt()
        self._close(self._all(), graceful=False)
        self.epoch = control.next_epoch(self.store, self.control_id)
        self._launch_again([])  # a start that fails ends the run in ERROR
        return True

    def _handle(
        self, deaths: list[control.InstanceRecord], error: str | None, record: control.RunControl
    ) -> None:
        live = record.live(self.target.parallelism)
        failure, failed = failure_of(self.fqfn, deaths, error, live)
        if error is not None:  # Spark's own words (Py4J, Java): the operator's log, not the cause
            _LOG.info("%s %s: its query failed:\n%s", self.target.kind, self.fqfn, error)
        cause = failure.cause
        self.failure = failure
        self.history = RestartHistory(self.history.times, time.monotonic())
        decision = decide(
            failure,
            self.policy,
            self.history,
            instance_ids=failed,
            parallelism=self.target.parallelism,
            handler=policy_handler(self.policy, self.py, f"{self.target.kind} {self.fqfn}"),
            stopping=self._stopping is not None and not self._drain_goes_on(),
        )
        if decision.handler_error:
            _LOG.error("%s %s: %s", self.target.kind, self.fqfn, decision.handler_error)
        response = decision.response
        applied = response.value
        if decision.chosen is not response:  # escalated, or the run was stopping
            applied += f" (the policy chose {decision.chosen.value})"
        _LOG.error("%s %s: %s; response %s", self.target.kind, self.fqfn, failure, applied)
        if decision.escalated:
            cause = escalated(cause, self.policy)
        shutdown = response in (Response.SHUTDOWN_FUNCTION, Response.SHUTDOWN_WORKER)
        if shutdown:
            # Terminated now (the reader admits nothing for ended instances); closing follows.
            self._shut_down(failed, f"{response.value}: {cause}")
        # Stop what must stop before the death is marked handled (the reader
        # starts no batch while a death waits for the supervisor).
        self.target.halt()
        if not deaths:
            for i in failed:
                control.record_death(
                    self.store, self.control_id, i, cause, fatal=False, epoch=self.epoch
                )
            if shutdown:
                self._shut_down(failed, f"{response.value}: {cause}")
        control.mark_handled(self.store, self.control_id, failed)
        if shutdown:
            self.target.cancel(f"{response.value}: {cause}", self.epoch)
            self._close(self._all(), graceful=False)
            self._finish(RunState.ERROR)
            if response is Response.SHUTDOWN_WORKER and self.on_worker_shutdown is not None:
                self.on_worker_shutdown(failure)
            return
        self._close(failed, graceful=False)
        if response is Response.SHUTDOWN_INSTANCE:
            self.target.retire(failed)
            # Shown ERROR with its cause, whatever a dying instance's own thread
            # recorded last (a source's runner may report its state late).
            control.set_state(
                self.store,
                self.control_id,
                control.ERROR,
                f"shut down: {cause}",
                failed,
                keep_other_ends=True,  # one that was stopped alone before it died stays so
            )
            now = control.read_control(self.store, self.control_id)
            if now is None or not now.live(self.target.parallelism):
                self._set_all(control.ERROR, f"every instance is shut down: {cause}", [])
                self._finish(RunState.ERROR)
                return
            if self.target.restarts_whole:
                self._relaunch([], f"instances {failed} shut down: {cause}")
            return
        self._replace(failed, decision.delay, cause)

    def _replace(self, failed: list[int], delay: float, cause: DeathCause) -> None:
        self.history = self.history.restarted(time.monotonic(), self.policy.restart_window)
        control.count_restart(self.store, self.control_id, failed)
        self._set_all(control.RESTARTING, f"restarting in {delay:g} s after: {cause}", failed)
        self._move(RunState.RESTARTING)
        self._lock.release()  # stop_instance/restart_instance may go on meanwhile
        try:  # the backoff; only a stop asked meanwhile cuts it short (hints wake too)
            deadline = time.monotonic() + delay
            while self._requested is None and (left := deadline - time.monotonic()) > 0:
                self._wake.wait(left)
                self._wake.clear()
        finally:
            self._lock.acquire()
        if self._ended.is_set():
            return
        if self._requested is not None and not self._drain_goes_on():
            if not self.target.restarts_whole:
                return  # the others still run: the next step stops them as asked
            mode = self._requested[0]
            self._stopping = mode
            self._end(mode, "stopped while restarting", graceful=False)
            return
        self._relaunch(failed, f"replaced after: {cause}")

    def _drain_goes_on(self) -> bool:
        """A drain outlives a failure of its query: the relaunch drains on to the same target.

        The drain's target and stop request stay in the run's record across
        epochs, so the restarted query reads up to them and ends
        ``STOPPED (drained)``. A suspend or cancel is not restarted: the
        failure already stopped what they were stopping.
        """
        requested = self._requested
        return (
            self.target.restarts_whole and requested is not None and requested[0] is StopMode.DRAIN
        )

    def _relaunch(self, revive: list[int], cause: str) -> None:
        self.epoch = control.next_epoch(self.store, self.control_id)
        control.revive(self.store, self.control_id, revive, cause, self.epoch)
        if self._launch_again(revive):
            control.set_state(self.store, self.control_id, control.RUNNING, cause)
            self._move(RunState.RUNNING)

    def _launch_again(self, revive: list[int]) -> bool:
        try:
            self.target.launch(self.epoch, revive)
        except Exception as exc:
            self._set_all(control.ERROR, f"restart failed: {user_text(str(exc))}")
            self._finish(RunState.ERROR)
            return False
        return True
