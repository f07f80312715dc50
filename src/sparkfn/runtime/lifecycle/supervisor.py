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

**Modules.** This class is put together from parts that share
:class:`~.supervisor_core.SupervisorCore` (its state, the record's moves,
the end of the run): the answers to failures (:mod:`.failures`), one
instance's stop (:mod:`.leaving`), and here the start, the stop and the
supervisor's thread.

**Moves.** Every move of the run's state is checked twice by the one
:func:`~.states.transition`: the supervisor's own state by the run's
table (:meth:`~.supervisor_core.SupervisorCore._move`) and the stored
record by :mod:`.moves`, which records it; a parked run is ``PARKED`` in
both (the target parks its query and :mod:`.parking` moves the record; the
supervisor's state follows at the same look, and back to ``RUNNING`` when
the query starts again). A move that either refuses
raises :class:`~.states.IllegalTransition`; the supervisor's thread never
retries such a step (it would be refused again), it ends the run in
``ERROR`` with the refusal as its cause
(:meth:`~.supervisor_core.SupervisorCore._defect`). Other failures of a
step (the store unreachable a moment) are retried.
"""

from __future__ import annotations

import logging
import threading
import time

from sparkfn.api.errors import StaleRunError
from sparkfn.api.lifecycle import RunState, StopMode
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.causes import user_text
from sparkfn.runtime.lifecycle.failures import FailureHandling
from sparkfn.runtime.lifecycle.leaving import InstanceStops
from sparkfn.runtime.lifecycle.lookout import Lookout
from sparkfn.runtime.lifecycle.states import IllegalTransition
from sparkfn.runtime.lifecycle.supervisor_core import Leave

__all__ = ["Leave", "Supervisor"]

_STARTED = frozenset({control.CREATED, control.STARTING, control.RUNNING})

_LOG = logging.getLogger("sparkfn.supervisor")


class Supervisor(FailureHandling, InstanceStops):
    """One run of a function, sink or source under its stop modes and failure policy.

    Built with the arguments of :class:`~.supervisor_core.SupervisorCore`.
    """

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
        # A run that a newer one replaced (in a cluster: its instance was given to another
        # worker) stops without writing the record, which is the newer run's now.
        record = control.read_control(self.store, self.control_id)
        if record is not None and record.epoch > self.epoch:
            self._fenced(record.epoch)
            return
        self._stopping = mode
        self._move(RunState.STOPPING)
        try:  # the stop is written in this run's epoch only: a bump since is seen there
            if mode is StopMode.CANCEL:
                control.request_stop(self.store, self.control_id, mode, epoch=self.epoch)
                began = True
            else:
                began = self.target.begin_stop(mode, point, cause)
        except StaleRunError:
            record = control.read_control(self.store, self.control_id)
            self._fenced(record.epoch if record is not None else self.epoch + 1)
            return
        if mode is StopMode.CANCEL:
            self.target.cancel(cause, self.epoch)
            self._end(mode, cause, graceful=False)
        elif not began:
            self._end(mode, cause, graceful=True)

    # --- watching -----------------------------------------------------------------------
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
                except IllegalTransition as exc:  # a defect: the same step would be refused again
                    with self._lock:
                        self._defect(exc)
                except Exception:
                    _LOG.exception(
                        "%s %s: supervisor step failed; retrying", self.target.kind, self.fqfn
                    )
                    lookout.failed()
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
        if record is None:  # deleted under a live run: nothing can be recorded any more
            msg = f"{self.control_id}: the run's record is gone while it runs"
            raise IllegalTransition(msg)
        if record.epoch > self.epoch:
            self._fenced(record.epoch)
            return
        deaths = [r for r in record.instances.values() if r.dead and not r.handled]
        mode = self._stopping
        graceful = mode is StopMode.DRAIN or mode is StopMode.SUSPEND
        if mode is not None and graceful and not deaths and self.target.stopped(record):
            # A death recorded as the target stopped (an instance dying in its last
            # steps, read before it was recorded) is answered, not ended as a drain.
            record = control.read_control(self.store, self.control_id) or record
            deaths = [r for r in record.instances.values() if r.dead and not r.handled]
            if not deaths:
                done = "drained" if mode is StopMode.DRAIN else "suspended"
                self._end(mode, done, graceful=True)
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
            if self._launch_again([]) and self.state is RunState.PARKED:
                self._move(RunState.RUNNING)  # as its record (parking's move_run)
        elif getattr(self.target, "parked", False) and self.state is RunState.RUNNING:
            self._move(RunState.PARKED)  # the target parked its query: as its record
