"""The supervisor: runs one function's query and keeps DESIGN.md 2.3's promises.

It lives in the driver's process (``localrun`` now, the worker later) and
drives the run through the store (:mod:`sparkfn.runtime.control`):

* **start**: record the run (a new epoch), start the query, ``RUNNING``;
* **drain / suspend**: ask the reader to stop admitting input (drain: after
  the offsets present now); the reader then plans one end-of-stream batch in
  which every live instance calls ``prepare_to_shutdown()``; once the sink
  has committed it the query stops and every worker process is told to call
  ``shutdown()`` and ``close()`` on its objects; ``STOPPED`` / ``SUSPENDED``;
* **cancel**: admit nothing, interrupt running tasks (they close their
  objects on the way out), stop the query, ``close()`` the idle objects;
  ``STOPPED``;
* **deaths** (``context.fatal`` recorded by a worker, or the query failing):
  stop the query, ``close()`` the dead instances' objects, then apply the
  failure policy: ``REPLACE_INSTANCE`` (restart with exponential backoff,
  escalating after ``max_restarts`` in ``restart_window``),
  ``SHUTDOWN_INSTANCE`` (restart without the dead instances: the reader
  gives their share to the others), ``SHUTDOWN_FUNCTION`` / ``SHUTDOWN_WORKER``
  (stop everything, persist ``ERROR``), or what a handler returns.

After every close request the supervisor waits until each object is marked
closed, or ``failure_policy.close_timeout`` passes, and then names the
objects that were not (:attr:`FunctionSupervisor.unclosed`).
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import DeathCause, FailureInfo, Response
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime import control
from sparkfn.store.store import Store
from sparkfn.topics.spark.source import current_ends

_LOG = logging.getLogger("sparkfn.supervisor")
POLL_SECONDS = 0.2
STOP_MODES = ("drain", "suspend", "cancel")

StartQuery = Callable[[int], Any]  # epoch -> StreamingQuery


class FunctionSupervisor:
    """One function's run: its query, its stop modes and its failure policy."""

    def __init__(
        self,
        store: Store,
        config: FunctionConfig,
        start_query: StartQuery,
        inputs: Callable[[], list[str]],
        *,
        kind: str = "function",
        on_worker_shutdown: Callable[[FunctionFailure], None] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.fqfn = config.fqfn
        self.policy = config.failure_policy
        self._start_query = start_query
        self._inputs = inputs
        self.kind = kind
        self.on_worker_shutdown = on_worker_shutdown
        self.query: Any = None
        self.epoch = 0
        self.stopping: str | None = None
        self.final_seq = 0
        self.unclosed: list[str] = []
        self.failure: FunctionFailure | None = None
        self.restart_times: deque[float] = deque()
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None

    # --- starting ---------------------------------------------------------------------
    def start(self, *, until_drained: bool = False) -> None:
        """Start the run; with ``until_drained`` it drains what is there now and stops."""
        self.epoch = control.begin_run(
            self.store, self.fqfn, self.kind, self.config.parallelism, "started"
        )
        try:
            self.query = self._start_query(self.epoch)
        except Exception as exc:
            self._set_all(control.ERROR, f"start failed: {exc}")
            self._ended.set()
            raise
        self._set_all(control.RUNNING, "started")
        self._thread = threading.Thread(
            target=self._monitor, name=f"sparkfn-supervisor-{self.fqfn}", daemon=True
        )
        self._thread.start()
        if until_drained:
            self.stop("drain", wait=False, cause="input is bounded (until drained)")

    def _set_all(self, state: str, cause: str, instances: list[int] | None = None) -> None:
        ids = [control.FUNCTION, *(instances if instances is not None else self._all())]
        control.set_state(self.store, self.fqfn, state, cause, ids)

    def _all(self) -> list[int]:
        return list(range(self.config.parallelism))

    # --- stopping ---------------------------------------------------------------------------
    def stop(
        self,
        mode: str = "drain",
        *,
        wait: bool = True,
        timeout: float | None = None,
        cause: str = "",
    ) -> bool:
        """Stop the run with ``mode`` (drain, suspend, cancel). Idempotent; a
        cancel during a drain or suspend takes over. True once ended."""
        if mode not in STOP_MODES:
            msg = f"function {self.fqfn}: stop mode must be one of {', '.join(STOP_MODES)}; got {mode!r}"
            raise ValueError(msg)
        with self._lock:
            if self._ended.is_set():
                return True
            if self.stopping is None or (mode == "cancel" and self.stopping != "cancel"):
                self.stopping = mode
                if mode == "cancel":
                    self._cancel(cause or "cancel requested")
                elif self.query is None or not self.query.isActive:
                    self._end(mode, cause or f"{mode} requested", graceful=True)
                else:
                    target = current_ends(self.store, self._inputs()) if mode == "drain" else None
                    self.final_seq = control.request_stop(self.store, self.fqfn, mode, target)
        self._wake.set()
        return self.wait(timeout) if wait else self._ended.is_set()

    def _cancel(self, cause: str) -> None:
        control.request_stop(self.store, self.fqfn, "cancel")
        everyone = self._all()
        control.issue_command(self.store, self.fqfn, "cancel", everyone, self.epoch)
        query = self.query
        if query is not None and query.isActive:
            # Give running tasks a moment to fail at a batch boundary (closing
            # their objects on the way out) before Spark kills their workers.
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and query.isActive:
                if not query.status.get("isTriggerActive", False):
                    break
                time.sleep(0.1)
            query.stop()
        self._end("cancel", cause, graceful=False)

    def _end(self, mode: str, cause: str, *, graceful: bool) -> None:
        """The query is stopped or stopping: close every object and record the final state."""
        if self.query is not None and self.query.isActive:
            self.query.stop()
        command = "graceful_close" if graceful else "close"
        self._close_objects(command, self._all())
        control.clear_stop(self.store, self.fqfn)
        state = control.SUSPENDED if mode == "suspend" else control.STOPPED
        record = control.read_control(self.store, self.fqfn)
        down = [
            i for i, r in (record.instances.items() if record else []) if r.state == control.ERROR
        ]
        control.set_state(self.store, self.fqfn, state, cause)
        up = [i for i in self._all() if i not in down]
        control.set_state(self.store, self.fqfn, state, cause, up)
        self._ended.set()

    def _close_objects(self, command: str, instances: list[int]) -> None:
        control.issue_command(self.store, self.fqfn, command, instances, self.epoch)
        deadline = time.monotonic() + self.policy.close_timeout
        while True:
            left = [o for o in control.open_objects(self.store, self.fqfn, instances) if o.alive]
            if not left:
                break
            if time.monotonic() > deadline:
                self.unclosed = [str(o) for o in left]
                _LOG.warning(
                    "function %s: objects not closed within %.0f s: %s",
                    self.fqfn,
                    self.policy.close_timeout,
                    "; ".join(self.unclosed),
                )
                break
            time.sleep(POLL_SECONDS / 2)
        for gone in control.open_objects(self.store, self.fqfn, instances):
            if gone.alive is False:
                control.mark_closed(self.store, gone.id, "lost: its process ended", None)

    # --- watching -----------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run has ended; True if it has."""
        return self._ended.wait(timeout)

    @property
    def ended(self) -> bool:
        """Whether the run has ended (stopped, suspended or in error)."""
        return self._ended.is_set()

    def _monitor(self) -> None:
        while not self._ended.is_set():
            self._wake.wait(POLL_SECONDS)
            self._wake.clear()
            try:
                with self._lock:
                    if not self._ended.is_set():
                        self._step()
            except Exception:
                _LOG.exception("function %s: supervisor step failed; retrying", self.fqfn)
                time.sleep(1.0)

    def _step(self) -> None:
        record = control.read_control(self.store, self.fqfn)
        query = self.query
        if record is None or query is None:
            return
        deaths = [r for r in record.instances.values() if r.dead and not r.handled]
        if (
            self.stopping in ("drain", "suspend")
            and not deaths
            and record.final_committed >= self.final_seq
        ):
            self._end(
                self.stopping, "drained" if self.stopping == "drain" else "suspended", graceful=True
            )
            return
        if deaths or not query.isActive:
            error = None if query.isActive else query.exception()
            if not deaths and error is None:
                self._end("cancel", "the query stopped", graceful=False)
                return
            self._handle(deaths, error)

    # --- failures -----------------------------------------------------------------------
    def _handle(self, deaths: list[control.InstanceRecord], error: Any) -> None:
        if self.query is not None and self.query.isActive:
            self.query.stop()
        if deaths:
            failed = sorted(d.instance_id for d in deaths)
            first = min(deaths, key=lambda d: d.died_at or 0)
            cause = first.death or DeathCause("Error", "unknown")
            fatal = any(d.fatal for d in deaths)
        else:
            record = control.read_control(self.store, self.fqfn)
            failed = record.live(self.config.parallelism) if record else self._all()
            cause = DeathCause("QueryFailed", _short(str(error)), str(error), "failure", "")
            fatal = False
            for i in failed:
                control.record_death(self.store, self.fqfn, i, cause, fatal=False, epoch=self.epoch)
        failure = FunctionFailure(self.fqfn, failed[0] if len(failed) == 1 else None, cause, fatal)
        self.failure = failure
        control.mark_handled(self.store, self.fqfn, failed)
        response = self._decide(failure, failed, fatal)
        _LOG.error("function %s: %s; response %s", self.fqfn, failure, response.value)
        if self.stopping is not None:
            response = Response.SHUTDOWN_FUNCTION  # no restarts while stopping
        if response is Response.REPLACE_INSTANCE:
            now = time.monotonic()
            while self.restart_times and now - self.restart_times[0] > self.policy.restart_window:
                self.restart_times.popleft()
            if len(self.restart_times) >= self.policy.max_restarts:
                response = Response.SHUTDOWN_FUNCTION
                cause = DeathCause(
                    cause.type,
                    f"{cause.message} (escalated: more than {self.policy.max_restarts} restarts "
                    f"within {self.policy.restart_window:g} s)",
                    cause.traceback,
                    cause.origin,
                    cause.thread,
                )
        if response in (Response.SHUTDOWN_FUNCTION, Response.SHUTDOWN_WORKER):
            # The query is stopped: the function is terminated now; closing follows.
            self._set_all(control.ERROR, f"{response.value}: {cause}")
            self._close_objects("close", self._all())
            self._ended.set()
            if response is Response.SHUTDOWN_WORKER and self.on_worker_shutdown is not None:
                self.on_worker_shutdown(failure)
            return
        self._close_objects("close", failed)
        if response is Response.SHUTDOWN_INSTANCE:
            record = control.read_control(self.store, self.fqfn)
            if record is None or not record.live(self.config.parallelism):
                self._set_all(control.ERROR, f"every instance is shut down: {cause}", [])
                self._ended.set()
                return
            self._restart([], f"instances {failed} shut down: {cause}")
            return
        # REPLACE_INSTANCE
        delay = self.policy.backoff(len(self.restart_times))
        self.restart_times.append(time.monotonic())
        control.count_restart(self.store, self.fqfn, failed)
        self._set_all(control.RESTARTING, f"restarting in {delay:g} s after: {cause}", failed)
        self._lock.release()
        try:
            stopped = self._wake.wait(delay) and self.stopping is not None
        finally:
            self._lock.acquire()
        if self._ended.is_set():
            return  # a stop during the backoff ended the run already
        if stopped or self.stopping is not None:
            self._end(self.stopping or "cancel", "stopped while restarting", graceful=False)
            return
        self._restart(failed, f"replaced after: {cause}")

    def _restart(self, revive: list[int], cause: str) -> None:
        self.epoch = control.next_epoch(self.store, self.fqfn)
        control.revive(self.store, self.fqfn, revive, cause, self.epoch)
        try:
            self.query = self._start_query(self.epoch)
        except Exception as exc:
            self._set_all(control.ERROR, f"restart failed: {exc}")
            self._ended.set()
            return
        control.set_state(self.store, self.fqfn, control.RUNNING, cause)

    def _decide(self, failure: FunctionFailure, failed: list[int], fatal: bool) -> Response:
        default = self.policy.on_fatal if fatal else self.policy.on_failure
        if self.policy.handler is None:
            return default
        info = FailureInfo(
            self.fqfn, failed, fatal, len(self.restart_times), self.config.parallelism
        )
        try:
            handler = load_handler(self.policy.handler, self.config.py)
            return Response(handler(failure, info))
        except Exception:
            _LOG.exception(
                "function %s: failure handler %s failed; applying %s",
                self.fqfn,
                self.policy.handler,
                default.value,
            )
            return default

    # --- instances ----------------------------------------------------------------------
    def stop_instance(self, instance_id: int, cause: str = "stopped by user") -> None:
        """Stop one instance; the others take over its share from the next batch."""
        with self._lock:
            control.set_state(self.store, self.fqfn, control.STOPPED, cause, [instance_id])
            self._close_objects("close", [instance_id])

    def restart_instance(self, instance_id: int, cause: str = "restarted by user") -> None:
        """Start a stopped or shut-down instance again; it takes its share back."""
        with self._lock:
            control.revive(self.store, self.fqfn, [instance_id], cause, self.epoch)


def load_handler(spec: str, py: str | None) -> Callable[..., Any]:
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


def _short(text: str) -> str:
    from sparkfn.runtime.localrun import short_error  # noqa: PLC0415

    return short_error(text)
