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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkfn.api.connector import END_OF_STREAM, PushSource, Record, Source, SourceContext
from sparkfn.api.errors import FatalError, SparkfnError
from sparkfn.api.lifecycle import DeathCause, GracefulShutdown, RunState
from sparkfn.api.lifecycle import StopMode as StopMode
from sparkfn.api.status import SourceInstanceStats
from sparkfn.config.connector import SourceConfig
from sparkfn.config.function import ProcessingGuarantee
from sparkfn.connectors.appender import TopicAppender
from sparkfn.runtime.lifecycle.states import FINAL_STATES as FINAL_STATES
from sparkfn.runtime.lifecycle.states import INSTANCE_TRANSITIONS
from sparkfn.store.store import Store

logger = logging.getLogger(__name__)

# The longest the runner waits before it looks at stop requests again, even
# when nobody woke it.
WAKE_SECONDS = 0.5
# A push source's queue holds at most this many batches before emit() blocks
# (back-pressure), while the instance runs normally.
QUEUE_BATCHES = 10


# An instance's states are the run's (RunState); the name stays for users of
# this module. A runner lives once: CREATED -> STARTING -> RUNNING -> STOPPING
# -> STOPPED | SUSPENDED | ERROR; the last three are final and every state
# change is in INSTANCE_TRANSITIONS (anything else is ignored, e.g. a stop
# request racing with the end of the run). A supervisor replaces a dead
# runner by a new one.
SourceState = RunState
_TRANSITIONS = INSTANCE_TRANSITIONS


def parse_stop_mode(mode: str | StopMode) -> StopMode:
    """``drain``, ``suspend`` or ``cancel`` (any case); ``ValueError`` naming the choices."""
    return StopMode.parse(mode)


@dataclass
class SourceStats:
    """What an instance did so far. Updated by the runner; read from any thread."""

    received: int = 0  # records read or emitted
    appended: int = 0  # records the store appended
    deduplicated: int = 0  # records the store dropped as appended before (effectively_once)
    acked: int = 0  # ack() calls that returned
    commits: int = 0  # commit() calls that returned
    errors: int = 0  # exceptions from the source or fatal() (the first one kills it)
    dropped: int = 0  # records emitted after the instance stopped taking them
    metrics: dict[str, list[float]] = field(default_factory=dict)  # record_metric: [count, sum]

    def as_status(self) -> SourceInstanceStats:
        """The counters, as an instance's status shows them."""
        return SourceInstanceStats(
            received=self.received,
            appended=self.appended,
            deduplicated=self.deduplicated,
            acked=self.acked,
            commits=self.commits,
            errors=self.errors,
            dropped=self.dropped,
        )


TransitionHook = Callable[[str, str, str], None]


class _Died(Exception):
    """Unwinds the runner's loop once a death is recorded."""


class InstanceContext(SourceContext):
    """The :class:`SourceContext` a runner gives its source.

    ``state_dir`` is a directory private to the source (not to the instance)
    under the data directory, where built-ins keep their progress.
    """

    def __init__(self, runner: SourceRunner, state_dir: Path) -> None:
        self._runner = runner
        self.state_dir = state_dir
        config = runner.config
        self._logger = logging.getLogger(f"sparkfn.source.{config.fqn}")

    def get_name(self) -> str:
        """The source's name."""
        return self._runner.config.name

    def get_tenant(self) -> str:
        """The source's tenant."""
        return self._runner.config.tenant

    def get_namespace(self) -> str:
        """The source's namespace."""
        return self._runner.config.namespace

    def get_instance_id(self) -> int:
        """This instance's id."""
        return self._runner.instance_id

    def get_num_instances(self) -> int:
        """The source's parallelism."""
        return self._runner.config.parallelism

    def get_logger(self) -> logging.Logger:
        """A logger named ``sparkfn.source.<tenant/namespace/name>``."""
        return self._logger

    def get_secret(self, secret_name: str) -> str | None:
        """A secret from ``secrets``: ``env:VAR``/``VAR`` or ``file:PATH#key``."""
        spec = self._runner.config.secrets.get(secret_name)
        if spec is None:
            return None
        from sparkfn.runtime.function.secrets import resolve_secret

        return resolve_secret(spec)

    def get_user_config_map(self) -> Mapping[str, Any]:
        """The source's ``configs``."""
        return self._runner.config.configs

    def record_metric(self, metric_name: str, metric_value: float) -> None:
        """Add an observation to a user metric (count and sum are kept)."""
        self._runner.record_metric(metric_name, metric_value)

    def fatal(self, exc: BaseException) -> None:
        """Terminate the instance with ``exc``; on the runner's own thread this raises."""
        self._runner.fatal(exc)

    def get_output_topic(self) -> str:
        """The source's output topic."""
        return self._runner.config.output

    def emit(self, record: Record) -> None:
        """Queue ``record`` for appending (any thread; may block while the queue is full)."""
        self._runner.emit(record)


class SourceRunner:
    """One source instance, run on a thread of its own (see the module docstring).

    ``factory`` builds the source object; by default it is loaded from the
    config (``source_type`` or ``py``/``classname``) on the runner's thread.
    ``on_transition(old, new, cause)`` is called on every state change, on
    the thread that makes it; it must not block for long.
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

    # --- what other threads see and ask -----------------------------------------

    @property
    def name(self) -> str:
        """The runner thread's name: ``source-<tenant/namespace/name>-<instance>``."""
        return f"source-{self.config.fqn}-{self.instance_id}"

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
                self._done.set()
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
        self._set_state(SourceState.STOPPING, cause)

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

    # --- state -----------------------------------------------------------------

    def _set_state(self, new: SourceState, cause: str) -> bool:
        with self._state_lock:
            old = self._state
            if new not in _TRANSITIONS.get(old, ()):
                return False
            self._state = new
            if self.on_transition is not None:
                try:
                    self.on_transition(old.value, new.value, cause)
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
        self._set_state(SourceState.STOPPING, f"{origin}: {self._death}")

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
            self._set_state(SourceState.RUNNING, "opened")
            if isinstance(source, PushSource):
                graceful = self._pump_push(source, appender)
            else:
                graceful = self._pump_pull(source, appender)
            if graceful:
                self._shut_down_gracefully(source, appender)
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

            return load_source(self.config)
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
            if not (isinstance(exc, FatalError) and self._death is not None):
                self._die(exc, "connector", self.name)  # else fatal() recorded it
            raise _Died from exc
        finally:
            self._in_call = None

    def _pump_pull(self, source: Source, appender: TopicAppender) -> bool:
        """Read and append until a stop; ``True`` if the end is graceful."""
        pending: list[Record] = []
        first_at = 0.0
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
                self._flush(source, appender, pending)
                pending = []
            if result is None:
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
        self._set_state(SourceState.STOPPING, self._stop_cause or "ending")
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
        self._set_state(final, cause)
        self._done.set()

    # --- helpers of the runner thread --------------------------------------------

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

    def _flush(self, source: Source, appender: TopicAppender, records: Sequence[Record]) -> None:
        """Append ``records`` in transactions of at most ``batch_size``; ack and commit each."""
        size = self.config.batch_size
        for start in range(0, len(records), size):
            if self._ending():
                return  # cancel or death: what is not appended is abandoned
            chunk = records[start : start + size]
            if self._guarantee is ProcessingGuarantee.AT_MOST_ONCE:
                self._acknowledge(source, chunk)
            try:
                ids = appender.append(chunk)
            except Exception as exc:
                bad_record = isinstance(exc, SparkfnError) and isinstance(
                    exc, ValueError | LookupError
                )
                self._die(exc, "connector" if bad_record else "failure", self.name)
                raise _Died from exc
            appended = sum(1 for i in ids if i is not None)
            with self._lock:
                self.stats.appended += appended
                self.stats.deduplicated += len(ids) - appended
            if self._death is not None:
                return  # after a death only close() is called
            if self._guarantee is not ProcessingGuarantee.AT_MOST_ONCE:
                self._acknowledge(source, chunk)

    def _acknowledge(self, source: Source, records: Sequence[Record]) -> None:
        for record in records:
            self._call(source, "ack", record)
            with self._lock:
                self.stats.acked += 1
        self._call(source, "commit")
        with self._lock:
            self.stats.commits += 1


def source_state_dir(data_dir: Path, config: SourceConfig) -> Path:
    """``<data dir>/sources/<tenant>/<namespace>/<name>``: a source's own files."""
    return data_dir / "sources" / config.tenant / config.namespace / config.name


def _death_cause(exc: BaseException, origin: str, thread: str) -> DeathCause:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if exc.__traceback__ is None:
        # Never raised (handed to fatal()): where it was reported is the clue.
        text += "reported at:\n" + "".join(traceback.format_stack()[:-3])
    return DeathCause(type(exc).__name__, str(exc), text, origin, thread)
