"""The runner's own thread: the one thread that calls a source (see :mod:`.runner`).

:class:`RunnerThread` is the base of :class:`~sparkfn.connectors.source.runner.SourceRunner`
and holds what happens on the runner's thread and the state both sides
share: create and ``open`` the source; pump its records (``read()`` for a
pull source, the queue its threads ``emit`` into for a push source) into
the output topic in transactions of at most ``batch_size``; on drain and
suspend ``prepare_to_shutdown()`` and ``shutdown()``; ``close()`` once, in a
``finally``; the state machine and the death every side may record.
:class:`~sparkfn.connectors.source.runner.SourceRunner` adds what other threads ask.

**Guarantees.** ``at_least_once`` (default): records are acked after the
transaction that appends them commits; a crash in between delivers them again.
``at_most_once``: records are acked (and ``commit()`` called) before they are
appended. ``effectively_once``: as at-least-once, and records carry a
``sequence_id`` by which the store drops what was appended before (see
:mod:`sparkfn.connectors.appender`).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkfn.api.connector import END_OF_STREAM, PushSource, Record, Source
from sparkfn.api.errors import BrokerUnreachableError, FatalError
from sparkfn.api.lifecycle import DeathCause, GracefulShutdown, RunState, StopMode
from sparkfn.config.connector import SourceConfig
from sparkfn.config.function import ProcessingGuarantee
from sparkfn.connectors.appender import TopicAppender
from sparkfn.connectors.source.append_pipe import Appending, AppendPipe
from sparkfn.connectors.source.append_pipe import Died as _Died
from sparkfn.runtime.lifecycle.states import (
    FINAL_STATES,
    RUNNER_TRANSITIONS,
    IllegalTransition,
    transition,
)
from sparkfn.store.store import Store

if TYPE_CHECKING:
    from sparkfn.connectors.source.source_context import InstanceContext, SourceStats

# One logger for the runner, whichever of its modules logs.
logger = logging.getLogger("sparkfn.connectors.runner")

# The longest the runner waits before it looks at stop requests again, unwoken.
WAKE_SECONDS = 0.5

# An instance's states are the run's (RunState): a runner lives once, by
# RUNNER_TRANSITIONS; a supervisor replaces a dead runner by a new one.
SourceState = RunState

TransitionHook = Callable[[str, str, str], None]


class RunnerThread(Appending):
    """The runner's thread and the state it shares with the requesting side (see the module docstring).

    :class:`~sparkfn.connectors.source.runner.SourceRunner` sets every attribute
    below in its ``__init__``.
    """

    config: SourceConfig
    store: Store
    instance_id: int
    on_transition: TransitionHook | None
    on_done: Callable[[], None] | None
    stats: SourceStats
    context: InstanceContext
    _factory: Callable[[], Source] | None
    _guarantee: ProcessingGuarantee
    _lock: threading.Lock
    _cond: threading.Condition
    _state_lock: threading.RLock
    _state: SourceState
    _stop_mode: StopMode | None
    _stop_cause: str
    _death: DeathCause | None
    _queue: collections.deque[Record]
    _accepting: bool
    _in_call: str | None
    _done: threading.Event
    _pipe: AppendPipe | None

    @property
    def name(self) -> str:
        """The runner thread's name: ``source-<tenant/namespace/name>-<instance>``."""
        return f"source-{self.config.fqn}-{self.instance_id}"

    def _set_state(self, new: SourceState, cause: str) -> bool:
        with self._state_lock:
            old = self._state
            if old == new:
                return False
            self._state = transition(old, new, RUNNER_TRANSITIONS, self.name)
            if self.on_transition is not None:
                try:
                    self.on_transition(old.value, new.value, cause)
                except IllegalTransition:
                    raise  # the stored record refused the move: a defect, never only logged
                except Exception:
                    logger.exception("%s: on_transition(%s -> %s) failed", self.name, old, new)
        return True

    def _die(self, exc: BaseException, origin: str, thread: str) -> None:
        with self._cond:
            self.stats.errors += 1
            if self._death is not None:
                return
            self._death = _death_cause(exc, origin, thread)
            self._accepting = False
            self._cond.notify_all()
        logger.error("%s died (%s, thread %s): %s", self.name, origin, thread, self._death)
        self._stopping_unless_ended(f"{origin}: {self._death}")

    def _stopping_unless_ended(self, cause: str) -> None:
        """Enter STOPPING, unless the runner has ended meanwhile (a request racing with its end)."""
        with self._state_lock:
            if self._state not in FINAL_STATES:
                self._set_state(SourceState.STOPPING, cause)

    def _opened(self) -> None:
        """``RUNNING``, unless a stop or death during ``open`` moved it on (a race: that stands)."""
        with self._state_lock:
            if self._state is SourceState.STARTING:
                self._set_state(SourceState.RUNNING, "opened")

    def _ending(self) -> bool:
        """Whether the run must end now, without another source call but close()."""
        return self._death is not None or self._stop_mode is StopMode.CANCEL

    # --- the runner thread -----------------------------------------------------

    def _main(self) -> None:
        source: Source | None = None
        opened = False
        try:
            if self._stop_mode is not None or self._death is not None:
                return  # stopped while starting: nothing opened, nothing to close
            source = self._create()
            if isinstance(source, PushSource):
                source.bind(self.context)
            appender = self._appender()
            opened = True
            self._call(source, "open", dict(self.config.configs), self.context)
            self._opened()
            if isinstance(source, PushSource):
                graceful = self._pump_push(source, appender)
            else:
                graceful = self._pump_pull(source, appender)
            if graceful:
                self._shut_down_gracefully(source, appender)
            elif self._death is None:
                self._settle(source)  # cancel: what was appended is acked
        except _Died:
            pass
        except BaseException as exc:  # a bug of ours or a store failure: still close
            self._die(exc, "failure", self.name)
        finally:
            self._finish(source if opened else None)

    def _create(self) -> Source:
        try:
            if self._factory is not None:
                return self._factory()
            from sparkfn.connectors.registry import load_source

            return load_source(self.config, check=False)  # open() checks
        except BaseException as exc:
            self._die(exc, "connector", self.name)
            raise _Died from exc

    def _appender(self) -> TopicAppender:
        try:
            return TopicAppender(self.store, self.config, self.instance_id)
        except BaseException as exc:
            self._die(exc, "failure", self.name)
            raise _Died from exc

    def _call(self, source: Source, method: str, *args: Any) -> Any:
        """Call a source method; any exception is the instance's death."""
        self._in_call = method
        try:
            return getattr(source, method)(*args)
        except BaseException as exc:
            raise self._call_failed(exc) from exc
        finally:
            self._in_call = None

    def _call_failed(self, exc: BaseException) -> _Died:
        """Record the death a source method's exception is; what unwinds the loop."""
        if not (isinstance(exc, FatalError) and self._death is not None):
            # A lost broker is a failure (the policy replaces the instance), not a fault.
            origin = "failure" if isinstance(exc, BrokerUnreachableError) else "connector"
            self._die(exc, origin, self.name)  # else fatal() recorded it
        return _Died()

    def _pump_pull(self, source: Source, appender: TopicAppender) -> bool:
        """Read and append until a stop; ``True`` if the end is graceful."""
        pending: list[Record] = []
        first_at = 0.0
        # The next read() overlaps the last batch's append (see .append_pipe).
        pipe = self._pipe = AppendPipe(appender, f"{self.name}-append")
        while True:
            if self._ending():
                return False
            if self._stop_mode is not None:
                self._flush(source, appender, pending + self._take_queue())
                return not self._ending()
            result = self._call(source, "read")
            if result is END_OF_STREAM:
                self._end_of_stream()
                continue
            acked = pipe.done() and self._settle(source)
            got = self._records(result, "read")
            queued = self._take_queue()
            if got:
                with self._lock:
                    self.stats.received += len(got)
            if (got or queued) and not pending:
                first_at = time.monotonic()
            pending.extend(got)
            pending.extend(queued)
            if pending and (
                result is None
                or len(pending) >= self.config.batch_size
                or time.monotonic() - first_at >= self.config.batch_timeout
            ):
                self._flush(source, appender, pending, wait=False)
                pending = []
            # Nothing to read now: ack what is appended, at once. A broker that hands out
            # only so many unacked messages (a prefetch) has more once they are acked, so
            # a loop that acked a batch reads again without sleeping.
            if result is None and not (self._settle(source) or acked):
                self._sleep(self.config.poll_interval)

    def _pump_push(self, source: Source, appender: TopicAppender) -> bool:
        """Append what the source's threads emit until a stop; ``True`` if graceful."""
        size = self.config.batch_size
        deadline: float | None = None
        while True:
            with self._cond:
                while self._stop_mode is None and self._death is None:
                    waiting = len(self._queue)
                    now = time.monotonic()
                    if waiting >= size:
                        break
                    if waiting:
                        if deadline is None:
                            deadline = now + self.config.batch_timeout
                        if now >= deadline:
                            break
                        self._cond.wait(min(deadline - now, WAKE_SECONDS))
                    else:
                        self._cond.wait(WAKE_SECONDS)
                batch = [self._queue.popleft() for _ in range(min(size, len(self._queue)))]
                deadline = None
            if self._ending():
                return False
            if self._stop_mode is not None:
                self._flush(source, appender, batch + self._take_queue())
                return not self._ending()
            self._flush(source, appender, batch)

    def _shut_down_gracefully(self, source: Source, appender: TopicAppender) -> None:
        """Drain and suspend: ``prepare_to_shutdown()``, append, ``shutdown()``."""
        if isinstance(source, GracefulShutdown) and not self._ending():
            out = self._call(source, "prepare_to_shutdown")
            final = self._records(out, "prepare_to_shutdown")
            with self._lock:
                self.stats.received += len(final)
            self._flush(source, appender, final + self._take_queue())
            if self._ending():
                return
            self._call(source, "shutdown")
        with self._cond:
            self._accepting = False
        # What the source's threads emitted until shutdown() returned.
        self._flush(source, appender, self._take_queue())

    def _finish(self, source: Source | None) -> None:
        """Close the source (the one place that does) and enter the final state."""
        with self._cond:
            self._accepting = False
            dropped = len(self._queue)
            self._queue.clear()
            self.stats.dropped += dropped
        if self._pipe is not None:
            self._pipe.close()  # nothing is appended once close() is called
        # A move the stored record refuses is raised once closed and done (no one waits forever).
        refused: IllegalTransition | None = None
        try:
            self._set_state(SourceState.STOPPING, self._stop_cause or "ending")
        except IllegalTransition as exc:
            refused = exc
        if source is not None:
            self._in_call = "close"
            try:
                source.close()
            except BaseException as exc:
                if self._death is None:
                    self._die(exc, "connector", self.name)
                else:
                    with self._lock:
                        self.stats.errors += 1
                    logger.exception("%s: close() failed after its death", self.name)
            finally:
                self._in_call = None
        if self._death is not None:
            final, cause = SourceState.ERROR, f"{self._death.origin}: {self._death}"
        elif self._stop_mode is StopMode.SUSPEND:
            final, cause = SourceState.SUSPENDED, self._stop_cause
        else:
            final, cause = SourceState.STOPPED, self._stop_cause or "stopped"
        try:
            self._set_state(final, cause)
        except IllegalTransition as exc:
            refused = refused or exc
        self._mark_done()
        if refused is not None:
            raise refused

    def _mark_done(self) -> None:
        """Mark the instance done, then tell whoever waits for it (``on_done``)."""
        self._done.set()
        if self.on_done is not None:
            try:
                self.on_done()
            except Exception:
                logger.exception("%s: on_done failed", self.name)

    def _end_of_stream(self) -> None:
        with self._cond:
            if self._stop_mode is None:
                self._stop_mode = StopMode.DRAIN
                self._stop_cause = "end of stream"
        self._set_state(SourceState.STOPPING, "end of stream")

    def _take_queue(self) -> list[Record]:
        with self._cond:
            taken = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()  # emitters blocked on a full queue
        return taken

    def _sleep(self, seconds: float) -> None:
        with self._cond:
            if self._stop_mode is None and self._death is None and not self._queue:
                self._cond.wait(seconds)

    def _records(self, result: Any, method: str) -> list[Record]:
        """``read()``'s or ``prepare_to_shutdown()``'s result as a list of records."""
        if result is None:
            return []
        if isinstance(result, Record):
            return [result]
        if isinstance(result, list | tuple) and all(isinstance(r, Record) for r in result):
            return list(result)
        exc = TypeError(
            f"source {self.config.fqn}: {method}() must return a Record, a list of Records, "
            f"None{' or END_OF_STREAM' if method == 'read' else ''}; "
            f"got a {type(result).__name__}: {result!r:.80}"
        )
        self._die(exc, "connector", self.name)
        raise _Died from exc


def _death_cause(exc: BaseException, origin: str, thread: str) -> DeathCause:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if exc.__traceback__ is None:
        # Never raised (handed to fatal()): where it was reported is the clue.
        text += "reported at:\n" + "".join(traceback.format_stack()[:-3])
    return DeathCause(type(exc).__name__, str(exc), text, origin, thread)
