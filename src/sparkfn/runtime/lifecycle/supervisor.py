"""One supervisor for functions, sinks and sources (DESIGN.md 2.3).

A :class:`Supervisor` runs one :class:`~.target.RunTarget` (a Spark query
for a function or a sink, :class:`~.query.QueryTarget`; the instance threads
of a source, :class:`~sparkfn.connectors.source.instances.SourceInstances`) and keeps
the promises the target cannot keep alone:

* **start**: record the run (a new epoch), launch the target, ``RUNNING``;
* **one instance's stop** (:meth:`Supervisor.stop_instance`): ``drain`` and
  ``suspend`` are asked like a run's stop and carried out by the
  supervisor's thread (the instance leaves at a batch boundary, its objects
  closed gracefully, ``STOPPED``); ``cancel`` acts at once;
* **stop** (``drain``, ``suspend``, ``cancel``): :meth:`Supervisor.stop`
  only records the request and wakes the supervisor's thread, which does the
  stopping (on drain and suspend the target winds down gracefully; on cancel
  at once), closes every object and records ``STOPPED`` or ``SUSPENDED``.
  :meth:`Supervisor.wait` is the blocking part. A cancel takes over a drain
  or suspend in progress, never the reverse;
* **deaths** (recorded in the run's control record by whoever saw them, or
  the target failing as a whole): close the dead instances' objects, then
  apply :func:`~.policy.decide`'s response: ``REPLACE_INSTANCE`` (relaunch
  after a backoff, escalating after ``max_restarts`` in ``restart_window``),
  ``SHUTDOWN_INSTANCE`` (the others keep running), ``SHUTDOWN_FUNCTION`` /
  ``SHUTDOWN_WORKER`` (stop everything, persist ``ERROR``).

**Threads.** The supervisor's own thread (``sparkfn-supervisor-<id>``) makes
every move after :meth:`Supervisor.start`; other threads only ask
(:meth:`~Supervisor.stop`, which returns at once) or wait.
:meth:`~Supervisor.stop_instance` and :meth:`~Supervisor.restart_instance`
act on the caller's thread between two of the supervisor's steps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkfn.api.errors import FunctionFailure, InstanceStoppingError
from sparkfn.api.lifecycle import DeathCause, Response, RunState, StopMode
from sparkfn.config.policy import FailurePolicy
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.causes import escalated, failure_of, fenced, user_text
from sparkfn.runtime.lifecycle.lookout import Lookout
from sparkfn.runtime.lifecycle.poison import PoisonHunter
from sparkfn.runtime.lifecycle.policy import RestartHistory, decide, policy_handler
from sparkfn.runtime.lifecycle.states import RUN_TRANSITIONS, transition
from sparkfn.runtime.lifecycle.target import RunTarget
from sparkfn.runtime.spark.liveness import SESSION_LOST
from sparkfn.store.store import Store

_STARTED = frozenset({control.CREATED, control.STARTING, control.RUNNING})

_LOG = logging.getLogger("sparkfn.supervisor")


@dataclass
class Leave:
    """One instance's graceful stop, asked and not yet complete.

    ``point`` is where a drain ends (the input's ends when it was asked);
    ``batch`` is set once the instance takes no more input: the batch it may
    still be in (:meth:`~.target.RunTarget.begin_leave`).
    """

    mode: StopMode
    point: Any
    cause: str
    begun: bool = False
    batch: Any = None


class Supervisor:
    """One run of a function, sink or source under its stop modes and failure policy."""

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

    # --- starting ---------------------------------------------------------------------
    def start(self, *, until_drained: bool = False) -> None:
        """Launch the run; with ``until_drained`` it drains what is there now and stops."""
        self.epoch = control.begin_run(
            self.store, self.control_id, self.target.kind, self.target.parallelism, "started"
        )
        self._move(RunState.STARTING)
        try:
            self.target.launch(self.epoch, self._all())
        except Exception as exc:
            self._set_all(control.ERROR, f"start failed: {user_text(str(exc))}")
            self._move(RunState.ERROR)
            self._ended.set()
            raise
        # A source's instance thread may have recorded RUNNING, or already its end
        # (a short bounded input), before this: those records stay.
        ids = [control.FUNCTION, *self._all()]
        control.set_state(
            self.store, self.control_id, control.RUNNING, "started", ids, only_from=_STARTED
        )
        self._move(RunState.RUNNING)
        self._thread = threading.Thread(
            target=self._monitor, name=f"sparkfn-supervisor-{self.control_id}", daemon=True
        )
        self._thread.start()
        if until_drained:
            self.stop(StopMode.DRAIN, cause="input is bounded (until drained)")

    def _move(self, state: RunState) -> None:
        self.state = transition(
            self.state, state, RUN_TRANSITIONS, f"{self.target.kind} {self.fqfn}"
        )

    def _set_all(self, state: str, cause: str, instances: list[int] | None = None) -> None:
        ids = [control.FUNCTION, *(instances if instances is not None else self._all())]
        control.set_state(self.store, self.control_id, state, cause, ids)

    def _shut_down(self, failed: list[int], cause: str) -> None:
        """The run and its failed instances in ERROR, the others cancelled (STOPPED)."""
        control.set_state(
            self.store, self.control_id, control.ERROR, cause, [control.FUNCTION, *failed]
        )
        others = [i for i in self._all() if i not in failed]
        if others:
            control.set_state(
                self.store, self.control_id, control.STOPPED, f"cancelled: {cause}", others
            )

    def _all(self) -> list[int]:
        return list(range(self.target.parallelism))

    # --- stopping ---------------------------------------------------------------------
    def stop(self, mode: str | StopMode = StopMode.DRAIN, *, cause: str = "") -> bool:
        """Ask the run to stop with ``mode``; returns at once (True if it has ended).

        Idempotent; a cancel takes over a drain or suspend, never the reverse.
        """
        try:
            stop_mode = StopMode.parse(mode)
        except ValueError as exc:
            msg = f"{self.target.kind} {self.fqfn}: {exc}"
            raise ValueError(msg) from None
        if self._ended.is_set():
            return True
        with self._request_lock:
            current = self._requested[0] if self._requested is not None else None
            if current is None or (stop_mode is StopMode.CANCEL and current is not StopMode.CANCEL):
                point = self.target.stop_point(stop_mode)
                self._requested = (stop_mode, point, cause or f"{stop_mode} requested")
        self._wake.set()
        return self._ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run has ended; True if it has."""
        return self._ended.wait(timeout)

    @property
    def ended(self) -> bool:
        """Whether the run has ended (stopped, suspended or in error)."""
        return self._ended.is_set()

    def _act_on_request(self) -> None:
        requested = self._requested
        if requested is None or requested[0] is self._stopping:
            return
        mode, point, cause = requested
        if self._stopping is StopMode.CANCEL:
            return
        self._stopping = mode
        self._move(RunState.STOPPING)
        if mode is StopMode.CANCEL:
            control.request_stop(self.store, self.control_id, StopMode.CANCEL)
            self.target.cancel(cause, self.epoch)
            self._end(mode, cause, graceful=False)
        elif not self.target.begin_stop(mode, point, cause):
            self._end(mode, cause, graceful=True)

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
        record = control.read_control(self.store, self.control_id)
        # Instances already ended (in ERROR, or stopped alone) keep their state.
        down = [
            i for i, r in (record.instances.items() if record else []) if r.state in control.ENDED
        ]
        up = [i for i in self._all() if i not in down]
        # One transaction: a status read never sees the function stopped and its instances running.
        control.set_state(self.store, self.control_id, state, cause, [control.FUNCTION, *up])
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

    # --- watching -----------------------------------------------------------------------
    def wake(self) -> None:
        """Make the supervisor look now (its target ended, or something else changed)."""
        self._wake.set()

    def _monitor(self) -> None:
        # A target that parks is tended at each look: its looks keep their own pace.
        tended = getattr(self.target, "parking", None) is not None
        lookout = Lookout(self.store, self.control_id, self._wake, shared=not tended)
        try:
            while not self._ended.is_set():
                stopping = self._stopping is not None or bool(self._leaving)
                if not lookout.due(
                    stopping=stopping, ended=lambda: self.target.finished() is not None
                ):
                    continue
                try:
                    with self._lock:
                        if not self._ended.is_set():
                            self._step()
                except Exception:
                    _LOG.exception(
                        "%s %s: supervisor step failed; retrying", self.target.kind, self.fqfn
                    )
                    time.sleep(1.0)
        finally:
            lookout.close()

    def _step(self) -> None:
        self._act_on_request()
        if self._ended.is_set():
            return
        # Asked before the record is read: a target that ended has recorded its deaths by then.
        ended = self.target.finished()
        record = control.read_control(self.store, self.control_id)
        if record is None:
            return
        if record.epoch > self.epoch:
            self._fenced(record.epoch)
            return
        deaths = [r for r in record.instances.values() if r.dead and not r.handled]
        mode = self._stopping
        graceful = mode is StopMode.DRAIN or mode is StopMode.SUSPEND
        if mode is not None and graceful and not deaths and self.target.stopped(record):
            self._end(mode, "drained" if mode is StopMode.DRAIN else "suspended", graceful=True)
            return
        if ended is not None and ended.lost:
            self._lose(ended.error or ended.cause)
            return
        ended = None if deaths else ended
        if ended is not None and ended.error is not None and self._hunt(ended.error):
            return
        if deaths or (ended is not None and ended.error is not None):
            error = ended.error if ended is not None else None
            if error is not None and self.hunter is not None:
                error = self.hunter.explained(error)  # a dead worker's exit status
            self._handle(deaths, error, record)
        elif ended is not None:
            self._end(ended.mode, ended.cause, graceful=ended.mode is not StopMode.CANCEL)
        elif mode is None and self._leaving:
            self._tend_leaves()
        elif mode is None and self.target.tend():  # parked, and its input has news
            _LOG.info("%s %s: input arrived; starting it again", self.target.kind, self.fqfn)
            self._launch_again([])

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

    # --- failures -----------------------------------------------------------------------
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
                self.store, self.control_id, control.ERROR, f"shut down: {cause}", failed
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

    # --- instances ----------------------------------------------------------------------
    def stop_instance(
        self,
        instance_id: int,
        mode: str | StopMode = StopMode.CANCEL,
        *,
        cause: str = "",
    ) -> None:
        """Stop one instance; the others take over its share.

        ``cancel`` stops it now: ``close()`` only, on this thread. ``drain``
        (what was in the input when asked is processed first) and
        ``suspend`` are asked here and carried out by the supervisor's
        thread: the instance takes no more input, the batch it is in
        commits, and its objects are closed gracefully
        (``prepare_to_shutdown()``, ``shutdown()``, ``close()``); then it is
        ``STOPPED``. Asking again while it stops changes nothing; a cancel
        takes over.
        """
        try:
            stop_mode = StopMode.parse(mode)
        except ValueError as exc:
            msg = f"{self.target.kind} {self.fqfn}: {exc}"
            raise ValueError(msg) from None
        if stop_mode is StopMode.CANCEL:
            with self._lock:
                self._leaving.pop(instance_id, None)
                control.set_state(
                    self.store,
                    self.control_id,
                    control.STOPPED,
                    cause or "stopped by user",
                    [instance_id],
                )
                self.target.retire([instance_id])
                self._close([instance_id], graceful=False)
            return
        record = control.read_control(self.store, self.control_id)
        found = record.instances.get(instance_id) if record is not None else None
        if found is not None and found.state in control.ENDED:
            return  # it runs no more: nothing to stop
        point = self.target.stop_point(stop_mode)  # a drain's: the input's ends now
        with self._request_lock:
            if instance_id not in self._leaving:
                self._leaving[instance_id] = Leave(
                    stop_mode, point, cause or f"{stop_mode.value} requested by user"
                )
        self._wake.set()

    def _tend_leaves(self) -> None:
        """Carry each instance's graceful stop one step on (the supervisor's thread)."""
        with self._request_lock:
            leaving = list(self._leaving.items())
        for i, leave in leaving:
            if not leave.begun:
                if leave.mode is StopMode.DRAIN and not self.target.reached(leave.point):
                    continue  # it takes its share until the input as of the drain is processed
                control.set_state(
                    self.store, self.control_id, control.STOPPING, leave.cause, [i], keep_ended=True
                )
                leave.batch = self.target.begin_leave(i, leave.mode)
                leave.begun = True
            if not self.target.left(i, leave.batch):
                continue
            self._close([i], graceful=True)
            done = "drained" if leave.mode is StopMode.DRAIN else "suspended"
            control.set_state(
                self.store,
                self.control_id,
                control.STOPPED,
                f"{done} ({leave.cause})",
                [i],
                keep_ended=True,
            )
            with self._request_lock:
                self._leaving.pop(i, None)

    def restart_instance(self, instance_id: int, cause: str = "restarted by user") -> None:
        """Start a stopped or shut-down instance again; it takes its share back."""
        with self._lock:
            leave = self._leaving.get(instance_id)
            if leave is not None:
                msg = (
                    f"{self.target.kind} {self.fqfn} instance {instance_id} is stopping "
                    f"({leave.cause}); start it again once it is STOPPED"
                )
                raise InstanceStoppingError(msg)
            control.revive(self.store, self.control_id, [instance_id], cause, self.epoch)
            if not self.target.restarts_whole:
                self.target.launch(self.epoch, [instance_id])
