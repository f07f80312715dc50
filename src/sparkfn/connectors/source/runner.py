"""Running one source instance on its own thread, with KIP-419's lifecycle.

>>> runner = SourceRunner(config, store, instance_id=0)
>>> runner.start()
>>> runner.stop("drain")          # from any thread, any number of times
>>> runner.wait(timeout=30)
True
>>> runner.state, runner.death
(<SourceState.STOPPED: 'STOPPED'>, None)

**One thread calls the source.** ``open``, ``read``, ``ack``, ``commit``,
``prepare_to_shutdown``, ``shutdown`` and ``close`` are all called on the
runner's thread, one after another, never concurrently. Other threads (a
signal handler, a supervisor, the source's own threads through
``context.fatal`` or ``notify_error``) only *request*: they set the stop mode
or the death under a lock and wake the runner. The runner's thread calls
``close()`` in a ``finally`` once its loop has ended, so ``close()`` is called
exactly once per opened source (also when ``open`` raised), after every other
call has returned, and nothing is called after it, however many stop
requests arrive and from however many threads. A push source's own threads
call only sparkfn's ``context.emit``; what they emit after the source is
closed (or after ``shutdown()`` returned) is dropped and counted.

**Limit.** sparkfn cannot interrupt a call in progress: a ``read()`` (or
``commit()``...) that blocks delays ``close()`` until it returns, and one
that never returns means ``close()`` is never called. :meth:`SourceRunner.wait`
then returns ``False`` and :attr:`SourceRunner.in_call` names the call.

**Stop modes.** ``drain``: stop reading; append everything read or emitted
so far; ``prepare_to_shutdown()`` (what it returns or emits is appended too);
``shutdown()``; ``close()``; ``STOPPED``. ``suspend``: the same, ending
``SUSPENDED``. ``cancel``: stop now; records read but not appended are
abandoned (not acked, so the source may deliver them again); ``close()``
only; ``STOPPED``. A later request may turn drain or suspend into cancel
(a second Ctrl+C), never the reverse. ``END_OF_STREAM`` from ``read()`` is
a drain.

**Failures.** An exception raised by any source method, ``context.fatal(exc)``
from any thread and ``PushSource.notify_error(exc)`` terminate the instance:
no source method but ``close()`` is called afterwards (no ack, no
``GracefulShutdown``), the state becomes ``ERROR`` and :attr:`SourceRunner.death`
holds the exception's type, message, traceback, origin and thread. A fatal
from another thread is seen within :data:`WAKE_SECONDS` unless a source call
is in progress.

**Guarantees** (at least once by default, at most once, effectively once):
see :mod:`.runner_thread`, where the runner's thread appends and acknowledges
records; the source's context is in :mod:`.source_context`.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from pathlib import Path

from sparkfn.api.connector import Record, Source
from sparkfn.api.errors import FatalError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.api.lifecycle import StopMode as StopMode
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.runner_thread import (
    WAKE_SECONDS,
    RunnerThread,
    TransitionHook,
    logger,
)
from sparkfn.connectors.source.runner_thread import SourceState as SourceState
from sparkfn.connectors.source.source_context import InstanceContext, source_state_dir
from sparkfn.connectors.source.source_context import SourceStats as SourceStats
from sparkfn.runtime.lifecycle.states import FINAL_STATES as FINAL_STATES
from sparkfn.store.store import Store

# A push source's queue holds at most this many batches before emit() blocks
# (back-pressure), while the instance runs normally.
QUEUE_BATCHES = 10


def parse_stop_mode(mode: str | StopMode) -> StopMode:
    """``drain``, ``suspend`` or ``cancel`` (any case); ``ValueError`` naming the choices."""
    return StopMode.parse(mode)


class SourceRunner(RunnerThread):
    """One source instance, run on a thread of its own (see the module docstring).

    ``factory`` builds the source object; by default it is loaded from the
    config (``source_type`` or ``py``/``classname``) on the runner's thread.
    ``on_transition(old, new, cause)`` is called on every state change, on
    the thread that makes it; it must not block for long. ``on_done()`` is
    called once the instance has ended, after :meth:`wait` returns true: a
    transition's hook runs a moment before that, so one who looks when a
    final state is recorded may still find the runner not done.
    """

    def __init__(
        self,
        config: SourceConfig,
        store: Store,
        instance_id: int = 0,
        *,
        factory: Callable[[], Source] | None = None,
        on_transition: TransitionHook | None = None,
        state_dir: Path | None = None,
        epoch: int = 0,
    ) -> None:
        if not 0 <= instance_id < config.parallelism:
            msg = (
                f"source {config.fqn}: instance_id must be between 0 and "
                f"{config.parallelism - 1}; got {instance_id}"
            )
            raise ValueError(msg)
        self.config = config
        self.store = store
        self.instance_id = instance_id
        self.epoch = epoch  # the run's epoch this runner was started in (its deaths belong to it)
        self.on_transition = on_transition
        self.on_done: Callable[[], None] | None = None
        self.stats = SourceStats()
        self.context = InstanceContext(self, state_dir or source_state_dir(store.data_dir, config))
        self._factory = factory
        self._guarantee = config.processing_guarantees
        # _lock guards the stop request, the death, the queue and the stats;
        # _cond wakes the runner (stop, death, emits) and blocked emitters.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # _state_lock orders state changes and their hook calls.
        self._state_lock = threading.RLock()
        self._state = SourceState.CREATED
        self._stop_mode: StopMode | None = None
        self._stop_cause = ""
        self._death: DeathCause | None = None
        self._queue: collections.deque[Record] = collections.deque()
        self._accepting = True
        self._in_call: str | None = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._pipe = None  # a pull source's appends, once it runs (see .append_pipe)

    # --- what other threads see and ask -----------------------------------------

    @property
    def state(self) -> SourceState:
        """The current state."""
        return self._state

    @property
    def death(self) -> DeathCause | None:
        """Why the instance died, once it has (``state`` ``ERROR`` after close)."""
        return self._death

    @property
    def stop_mode(self) -> StopMode | None:
        """The stop requested so far (``drain`` after the end of the stream)."""
        return self._stop_mode

    @property
    def in_call(self) -> str | None:
        """The source method running now, e.g. ``"read"``; ``None`` between calls."""
        return self._in_call

    def start(self) -> None:
        """Start the runner thread; a runner stopped before it started stays stopped."""
        with self._state_lock:
            if self._state is not SourceState.CREATED:
                if self._state in FINAL_STATES and self._thread is None:
                    return
                msg = f"{self.name}: start() called twice"
                raise RuntimeError(msg)
            self._set_state(SourceState.STARTING, "start requested")
            # A daemon: a source stuck in read() must not keep the process
            # alive after the user gave up on it (a third Ctrl+C).
            self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, mode: str | StopMode = StopMode.DRAIN, cause: str = "") -> None:
        """Ask the instance to stop (any thread, any number of times; returns at once).

        The first request decides between drain and suspend; ``cancel`` may
        follow either. Requests after the instance ended do nothing.
        """
        stop_mode = parse_stop_mode(mode)
        cause = cause or f"{stop_mode.value} requested"
        with self._state_lock:
            if self._state is SourceState.CREATED:
                final = (
                    SourceState.SUSPENDED if stop_mode is StopMode.SUSPEND else SourceState.STOPPED
                )
                self._stop_mode = stop_mode
                self._set_state(final, f"{cause} before start")
                self._mark_done()
                return
        with self._cond:
            if self._state in FINAL_STATES:
                return
            if self._stop_mode is None or (
                stop_mode is StopMode.CANCEL and self._stop_mode is not StopMode.CANCEL
            ):
                self._stop_mode = stop_mode
                self._stop_cause = cause
                if stop_mode is StopMode.CANCEL:
                    self._accepting = False
            self._cond.notify_all()
        self._stopping_unless_ended(cause)

    def fatal(self, exc: BaseException, origin: str = "fatal") -> None:
        """Terminate the instance with ``exc`` (any thread).

        On the runner's own thread (inside a source method) it raises
        :class:`FatalError` so that the method goes no further.
        """
        self._die(exc, origin, threading.current_thread().name)
        if threading.current_thread() is self._thread:
            msg = f"{self.name}: {type(exc).__name__}: {exc}"
            raise FatalError(msg) from exc

    def emit(self, record: Record) -> None:
        """Queue ``record``; see :meth:`InstanceContext.emit`."""
        candidate: object = record  # user code is not type-checked
        if not isinstance(candidate, Record):
            exc = TypeError(
                f"source {self.config.fqn}: emit() takes a sparkfn Record; "
                f"got a {type(record).__name__}: {record!r:.80}"
            )
            self._die(exc, "connector", threading.current_thread().name)
            raise exc
        on_runner = threading.current_thread() is self._thread
        limit = self.config.batch_size * QUEUE_BATCHES
        with self._cond:
            # Back-pressure only while running normally, and never on the
            # runner's thread (it is the one that empties the queue).
            while (
                self._accepting
                and not on_runner
                and self._stop_mode is None
                and len(self._queue) >= limit
            ):
                self._cond.wait(WAKE_SECONDS)
            if not self._accepting:
                self.stats.dropped += 1
                return
            self._queue.append(record)
            self.stats.received += 1
            if len(self._queue) == 1 or len(self._queue) >= self.config.batch_size:
                self._cond.notify_all()

    def record_metric(self, name: str, value: float) -> None:
        """Count a user metric observation."""
        with self._lock:
            entry = self.stats.metrics.setdefault(name, [0.0, 0.0])
            entry[0] += 1
            entry[1] += value

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the instance ended (``close()`` returned); ``False`` on timeout."""
        return self._done.wait(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the runner thread; on timeout log which source call holds it up."""
        thread = self._thread
        if thread is None:
            return self._done.is_set()
        thread.join(timeout)
        if thread.is_alive():
            logger.warning(
                "%s: still in %s() after %.1f s; close() follows when it returns",
                self.name,
                self._in_call or "its loop",
                timeout or 0.0,
            )
            return False
        return True
