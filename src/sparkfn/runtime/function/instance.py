"""One function instance inside a Python worker process: the per-message engine.

:class:`FunctionInstance` owns the user object and its
:class:`~sparkfn.runtime.function.context.FunctionContext`. For each task it
is given the input rows and a view of committed state; it runs the function
per message (or per batch), with Pulsar's rules:

* a ``process`` call that raises leaves no trace: outputs, publishes and
  state changes since the message began are discarded;
* each failure is counted as a user exception and kept among the latest
  exceptions; the message is negative-acked and delivered again after a
  delay (:mod:`.redelivery`), without end unless ``max_message_retries``
  is set (a window or vectorized batch: tried again at once, that often);
* then it goes to the dead letter topic (with the error in its properties)
  or is dropped.

The attempts are :func:`~sparkfn.runtime.function.attempts.attempt_each`,
for a message and a vectorized batch alike. The same engine serves the Spark
runtime and :mod:`sparkfn.testing`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import pyarrow as pa

from sparkfn.api.errors import FatalError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.attempts import EmitResult, attempt_each
from sparkfn.runtime.function.context import FatalOrigin, FunctionContext
from sparkfn.runtime.function.emit import EmitBuffer, Emitted
from sparkfn.runtime.function.instance_serdes import InstanceSerdes
from sparkfn.runtime.function.loader import UserFunction
from sparkfn.runtime.function.redelivery import dead_letter, fail_message
from sparkfn.runtime.function.rows import InputRows
from sparkfn.runtime.function.timeout import Watchdog, timed
from sparkfn.runtime.function.topics import PartitionCounts, TopicCatalog
from sparkfn.runtime.function.vectorized import decode_batch, emit_batch_result
from sparkfn.runtime.function.window import WindowRunner
from sparkfn.runtime.stats import InstanceStats
from sparkfn.state.buffer import CommittedState, StateBuffer, StateMutation, StateReader

_LOG = logging.getLogger("sparkfn.lifecycle")


class InstanceState(Enum):
    """Where a function object is in its life (DESIGN.md 2.3, "Objects").

    It only moves forward, along :data:`_TRANSITIONS`; every change holds the
    instance's lock.
    """

    CREATED = "created"  # constructed; initialize() not called yet (the first task calls it)
    RUNNING = "running"  # initialize() returned: tasks call process()
    PREPARED = "prepared"  # prepare_to_shutdown() was called; tasks may still end (flush)
    SHUT_DOWN = "shut_down"  # shutdown() was called (graceful stops); close() follows at once
    CLOSED = "closed"  # close() was called, or never needed (not initialized): nothing follows


_TRANSITIONS: dict[InstanceState, frozenset[InstanceState]] = {
    InstanceState.CREATED: frozenset({InstanceState.RUNNING, InstanceState.CLOSED}),
    InstanceState.RUNNING: frozenset({InstanceState.PREPARED, InstanceState.CLOSED}),
    InstanceState.PREPARED: frozenset({InstanceState.SHUT_DOWN, InstanceState.CLOSED}),
    InstanceState.SHUT_DOWN: frozenset({InstanceState.CLOSED}),
    InstanceState.CLOSED: frozenset(),
}

# States whose object has been initialized and not yet shut down or closed.
_LIVE = frozenset({InstanceState.RUNNING, InstanceState.PREPARED})


@dataclass
class TaskResult:
    """What one instance produced in one task; committed with the batch."""

    instance_id: int
    emitted: EmitBuffer
    mutations: list[StateMutation]
    stats: InstanceStats


class FunctionInstance:
    """A user function object and its context, for one instance id, in one process.

    ``topics`` tells the schema type of the topics the instance writes to.
    """

    def __init__(
        self,
        config: FunctionConfig,
        instance_id: int,
        user: UserFunction,
        topics: TopicCatalog,
        version: str = "1",
        data_dir: str | None = None,
        negative_acks: bool = False,
    ) -> None:
        self.config = config
        # A failed message is delivered again later (.redelivery): on Spark, not the harness.
        self.negative_acks = negative_acks and config.negative_acks and not user.vectorized
        # Where the instance's log file is (sparkfn.runtime.function.logs); None: no file.
        self.data_dir = data_dir
        self.instance_id = instance_id
        self.user = user
        self.version = version
        self.partitioned = PartitionCounts(topics)  # for Pulsar's -partition-N names
        # Whether an output carries its input's key and properties: unset, not for
        # Pulsar's behaviour (its Python runtime forwards neither), yes for sparkfn's own.
        given = config.forward_source_message_property
        self.forwards = (not user.pulsar) if given is None else given
        self.serdes = InstanceSerdes(config, topics, pulsar=user.pulsar)
        self.context = FunctionContext(self)
        self.state = StateBuffer(_no_state)
        self.stats = InstanceStats()
        self.out = EmitBuffer(self.config.output or "")
        window = config.window_config
        self.window = WindowRunner(self, window) if window is not None else None
        # What an attempt calls: the function, under timeout_ms's watch if it interrupts.
        self.call = user.call
        self.watchdog: Watchdog | None = None
        if config.timeout_ms is not None and config.timeout_interrupts:
            self.watchdog = Watchdog(f"{config.fqfn}-{instance_id}")
            what = f"function {config.fqfn} instance {instance_id}"
            self.call = timed(user.call, self.watchdog, config.timeout_ms, what)
        self._logs: list[Emitted] = []  # appended from any thread: under _logs_lock
        self._logs_lock = threading.Lock()
        self._finishing = False  # finish() runs prepare_to_shutdown(): what it publishes counts
        self.pending_metrics: list[tuple[str, float]] = []
        # Lifecycle (DESIGN.md 2.3). Every call into the user object holds
        # ``lock``, so calls are never concurrent; after CLOSED nothing is
        # called. ``interrupt`` is set by fatal() (any thread) or a cancel, and
        # the task raises it at the next batch boundary.
        self.lifecycle = InstanceState.CREATED
        self.lock = threading.RLock()
        self.epoch = 0  # the query epoch the object was created in
        self.object_id: int | None = None  # its row in function_objects
        self.store_key: tuple[str, str] | None = None  # (url, data dir) it was created for
        # Created for an instance that stopped alone (a task of a batch planned before):
        # closed gracefully once that task ends (runtime.query.executor).
        self.last_task = False
        self.task_thread: int | None = None
        self.interrupt: BaseException | None = None
        self.on_fatal: Callable[[DeathCause], None] | None = None

    @property
    def closed(self) -> bool:
        """Whether ``close()`` ran (or the object ended without being initialized)."""
        return self.lifecycle is InstanceState.CLOSED

    def _move(self, to: InstanceState) -> None:
        if to not in _TRANSITIONS[self.lifecycle]:
            msg = (
                f"function {self.config.fqfn} instance {self.instance_id}: no lifecycle "
                f"transition from {self.lifecycle.name} to {to.name}"
            )
            raise RuntimeError(msg)
        self.lifecycle = to

    # --- emission ---------------------------------------------------------------
    def emit(self, item: Emitted) -> None:
        """Buffer an output of the current message (from any thread, while a task runs).

        Outputs commit with a batch. Between tasks (a thread of the
        function's own, or ``shutdown()`` and ``close()``) there is no batch
        to commit one with, so a publish then raises rather than vanish.
        """
        if self.task_thread is None and not self._finishing:
            msg = (
                f"function {self.config.fqfn} instance {self.instance_id}: context.publish "
                f"called in thread {threading.current_thread().name!r} while no batch of the "
                "instance runs; what a function publishes commits with a batch, so publish "
                "while process() runs (from any thread), or use a Producer for messages of "
                "your own"
            )
            raise RuntimeError(msg)
        self.out.append(item)

    def emit_log(self, item: Emitted) -> None:
        """Buffer a log record, from any thread; it goes out with the next task's output.

        Logs are kept even when the message fails, and records logged
        between tasks (``initialize()``, a thread of the function's own)
        wait for the next task.
        """
        with self._logs_lock:
            self._logs.append(item)

    def take_output(self) -> EmitBuffer:
        """Hand over what was emitted so far (between messages only)."""
        out, self.out = self.out, EmitBuffer(self.config.output or "")
        with self._logs_lock:
            logs, self._logs = self._logs, []
        for item in logs:
            out.append(item)
        return out

    # --- the task ------------------------------------------------------------------
    def begin_task(self, reader: StateReader) -> None:
        """Start a task: fresh buffers over committed state from ``reader``.

        The object's ``initialize(context)`` is called here, by its first task.
        """
        self.check_interrupt()
        if self.lifecycle not in (InstanceState.CREATED, *_LIVE):
            msg = f"function {self.config.fqfn} instance {self.instance_id}: object is closed"
            raise RuntimeError(msg)
        self.task_thread = threading.get_ident()
        if self.lifecycle is InstanceState.CREATED:
            self.user.initialize(self.context)
            self._move(InstanceState.RUNNING)
        self.state = StateBuffer(reader)
        self.stats = InstanceStats()
        # What a failed task emitted is not committed; its logs (and those of
        # initialize() or the function's threads since) go with this task's output.
        self.out = EmitBuffer(self.config.output or "")

    def end_task(self) -> TaskResult:
        """Finish the task: everything to commit with the batch.

        An object with a ``sparkfn_end_task()`` method (the sink adapter:
        ``Sink.flush``) has it called first, still inside the task.
        """
        self.context.bind(None, -1)
        hook = self.user.hook("sparkfn_end_task")
        if hook is not None:
            self.pending_metrics.clear()
            hook()
            for name, metric in self.pending_metrics:
                self.stats.record_metric(name, metric)
            self.pending_metrics.clear()
        self.task_thread = None
        return TaskResult(self.instance_id, self.take_output(), self.state.drain(), self.stats)

    def process_rows(self, rows: InputRows) -> None:
        """Run the per-message function over every row (see :func:`~.attempts.attempt_each`),
        or, for a window function, take the rows into its windows (:mod:`.window`)."""
        rows.partitioned = self.partitioned
        self.context.bind(rows, -1)
        if self.window is not None:
            self.window.process_rows(rows)
            self.stats.received += rows.n
            self.stats.last_invocation_ms = int(time.time() * 1000)
            return
        output = self.config.output
        values, topics = rows.arguments(self.serdes.input_for)
        forward = self.forwards
        failed = attempt_each(
            self,
            values,
            rows.column("key") if forward else [None] * rows.n,
            topics,
            None if output else _discard,
            properties=range(rows.n) if output else None,  # resolved below, by Arrow
            nack=self.negative_acks,
        )
        if output:
            self.out.resolve(rows.output_properties_map(forward))
        for i, error in failed:  # negative-acked (.redelivery), else dead-lettered
            fail_message(self, rows, i, error)
        self.stats.received += rows.n
        self.stats.last_invocation_ms = int(time.time() * 1000)

    def tick(self) -> None:
        """The clock moved without input: a window function fires the time windows now due."""
        if self.window is not None:
            self.context.bind(None, -1)
            self.window.tick()

    def process_batch(self, batch: pa.RecordBatch) -> None:
        """Run a vectorized function over ``batch``: the whole batch is one message
        for :func:`~.attempts.attempt_each`; when every attempt fails, each row is dead-lettered."""
        self.stats.received += batch.num_rows
        self.context.bind(None, -1)
        arg: Any = decode_batch(batch, self.serdes.input_for)
        if self.user.batch_format == "pandas":
            arg = arg.to_pandas()
        failed = attempt_each(self, [arg], [None], [None], self._batch_emitter(), batch.num_rows)
        if failed:
            rows = InputRows(batch)
            for i in range(rows.n):
                dead_letter(self, rows, i, failed[0][1])
        self.stats.last_invocation_ms = int(time.time() * 1000)

    def _batch_emitter(self) -> EmitResult:
        """How a vectorized function's result reaches the output topic."""
        output = self.config.output
        if not output:
            return _discard

        def emit(result: Any, key: str | None) -> None:
            emit_batch_result(result, self.config.fqfn, output, self.serdes.output_for, self.out)

        return emit

    # --- lifecycle ---------------------------------------------------------------
    def check_interrupt(self) -> None:
        """Raise the fatal error (or cancel) recorded for this instance, if any."""
        if self.interrupt is not None:
            raise self.interrupt

    def fatal(self, exc: BaseException, origin: FatalOrigin = "fatal") -> None:
        """``context.fatal(exc)``: terminate the instance, from any thread (PIP-297).

        The first call records the death (through ``on_fatal``) and logs it at
        ERROR; the running task, if any, fails at once when called from its
        thread, else at its next batch boundary.
        """
        thread = threading.current_thread().name
        cause = DeathCause.from_exception(exc, origin, thread)
        error = FatalError(
            f"function {self.config.fqfn} instance {self.instance_id} terminated by "
            f"context.fatal in thread {thread!r}: {cause}"
        )
        if not isinstance(self.interrupt, FatalError):
            self.interrupt = error
            _LOG.error("%s", error, exc_info=(type(exc), exc, exc.__traceback__))
            if self.on_fatal is not None:
                self.on_fatal(cause)
        if threading.get_ident() == self.task_thread:
            raise error from exc

    def prepare_to_shutdown(self) -> None:
        """Call the object's ``prepare_to_shutdown()`` once; what it returns goes to the output."""
        if self.lifecycle is not InstanceState.RUNNING:
            return  # called already, never initialized, or ended
        self._move(InstanceState.PREPARED)
        hook = self.user.hook("prepare_to_shutdown")
        if hook is None:
            return
        self.context.bind(None, -1)
        result = hook()
        if self.context.callbacks:
            self.context.run_callbacks()
        output = self.config.output
        if result is None or not output:
            return
        serde = self.serdes.output_for(output)
        for value in result if isinstance(result, list | tuple) else [result]:
            if value is not None:
                self.out.append(Emitted("output", output, serde.encode(value), None))

    def finish(self, *, graceful: bool) -> list[Emitted]:
        """End the object: on graceful stops ``prepare_to_shutdown()`` (if the final
        batch did not reach it) and ``shutdown()``; then ``close()``, exactly once.

        Returns what ``prepare_to_shutdown()`` emitted here, for the caller to
        append. Holds the lock: never concurrent with a task.
        """
        with self.lock:
            if self.lifecycle is InstanceState.CLOSED:
                return []
            try:
                if not graceful or self.lifecycle not in _LIVE:
                    return []
                self.out = EmitBuffer(self.config.output or "")
                self._finishing = True
                try:
                    self.prepare_to_shutdown()
                finally:
                    self._finishing = False
                emitted = self.take_output().items()
                self._move(InstanceState.SHUT_DOWN)
                hook = self.user.hook("shutdown")
                if hook is not None:
                    hook()
                return emitted
            finally:
                self.close()

    def close(self) -> None:
        """Close the user object: once, and only if it was initialized; nothing after it."""
        with self.lock:
            if self.lifecycle is InstanceState.CLOSED:
                return
            initialized = self.lifecycle is not InstanceState.CREATED
            self._move(InstanceState.CLOSED)
            if self.watchdog is not None:
                self.watchdog.close()
            try:
                if initialized:
                    self.user.close()
            finally:
                self.context.close_log_files()


def _no_state(key: str) -> CommittedState:
    return CommittedState(None, None)


def _discard(result: Any, key: str | None) -> None:
    """No output topic: what the function returns goes nowhere."""
