"""Client-side batching for ``Producer.send_async``, as Pulsar's producers batch.

Messages are buffered in an open batch. The batch is sealed when it holds
``max_messages`` or ``max_delay`` seconds after its first message, and sealed
batches are appended in order by one flusher thread: one store transaction
per batch instead of per message (or per several batches, when they are
sealed faster than they are appended), and the offsets of a partition
follow the order in which the messages were added.

Each message gets a :class:`~sparkfn.topics.message_future.MessageFuture`
that resolves to its id once its append committed, or carries the exception
that failed the append (every future of it gets it: nothing is dropped
silently).

A failure is final (:attr:`BatcherState.FAILED`): the first append that
fails, or the flusher thread stopping on an error, fails the batcher. The
batches queued behind that append are not tried (their futures carry a
:class:`~sparkfn.api.errors.ProducerClosedError` caused by the first
failure), no message is accepted any more, and every later
:meth:`Batcher.flush` and :meth:`Batcher.close`, from any thread, raises a
``ProducerClosedError`` naming the producer, its topic and the first failure
(its ``__cause__``). So what was appended is always a prefix of what was
added, and no caller of ``flush`` or ``close`` is told that its messages
are durable when one of them failed: a failure raised once, to whichever
thread flushed first, would let another thread's ``flush`` return normally
although its messages were in the failed append.

Threads: :meth:`Batcher.add` may be called from any number of threads. The
flusher thread is started by the first ``add``, is a daemon, and ends in
:meth:`Batcher.close`, which joins it. Futures resolve, and their done
callbacks run, on the flusher thread: a callback must not wait for the
producer (``flush``, ``close``), or it would wait for itself.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime
from enum import Enum

from sparkfn.api.errors import ConfigError, ProducerClosedError
from sparkfn.topics import at_exit
from sparkfn.topics.append import MessageColumns
from sparkfn.topics.message_future import FutureBatch, MessageFuture, ids_by_batch, merged_parts

# Messages one append takes at most when it merges sealed batches (see Batcher._next).
MERGE_LIMIT = 20_000

# Appends sealed batches' messages; returns each partition's ids in row order.
AppendBatch = Callable[[dict[int, MessageColumns]], dict[int, list[str | None]]]


class BatcherState(Enum):
    """Where a batcher is in its life."""

    IDLE = "idle"  # nothing sent asynchronously yet: no thread
    RUNNING = "running"  # the flusher thread runs; adds are accepted
    # An append failed: adds are refused, what was queued is failed untried,
    # and flush and close raise; the thread waits for close().
    FAILED = "failed"
    # close() was called, or the flusher thread stopped on an error: adds are
    # refused; the thread ends once drained. After a failure flush and close raise.
    CLOSED = "closed"


class Batcher:
    """Buffers messages into batches and appends them on a background thread.

    ``append`` appends one batch atomically (for a producer:
    :func:`sparkfn.topics.append.append` on its topic). ``max_pending`` bounds
    the messages buffered and not yet appended (0: no bound); ``add`` blocks
    while it is reached, so a sender cannot outrun the store by more.

    The first failure is final (see the module docstring): from then on
    :meth:`add` raises at once and :meth:`flush` and :meth:`close` raise,
    every time and on every thread.
    """

    def __init__(
        self,
        append: AppendBatch,
        *,
        name: str,
        max_messages: int,
        max_delay: float,
        max_pending: int,
    ) -> None:
        self._append = append
        self._name = name
        self._max_messages = max_messages
        self._max_delay = max_delay
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._state = BatcherState.IDLE
        self._thread: threading.Thread | None = None
        self._open: FutureBatch | None = None
        self._sealed: deque[FutureBatch] = deque()
        self._sealed_count = 0  # number of the last batch sealed
        self._done_count = 0  # number of the last batch appended or failed
        self._pending = 0  # messages added and not yet appended or failed
        self._failure: BaseException | None = None  # the first failure; never cleared
        self._failed_messages = 0  # messages failed, since the first failure

    @property
    def state(self) -> BatcherState:
        """Where the batcher is in its life (see :class:`BatcherState`)."""
        return self._state

    @property
    def name(self) -> str:
        """What errors and the flusher thread are called after."""
        return self._name

    @property
    def pending(self) -> int:
        """Messages added and not yet appended or failed."""
        return self._pending

    @property
    def thread(self) -> threading.Thread | None:
        """The flusher thread, once started."""
        return self._thread

    def add(
        self,
        partition: int,
        value: bytes,
        key: str | None,
        properties: list[tuple[str, str]] | None,
        event_time: datetime | None,
        sequence_id: int | None,
    ) -> Future[str | None]:
        """Buffer one message (fields already checked); its future resolves to its id."""
        # The lock itself rather than the condition around it: the condition's
        # __enter__ is a Python call, and this runs once per message.
        with self._lock:
            if self._state is not BatcherState.RUNNING:
                self._start()
            if self._max_pending and self._pending >= self._max_pending:
                self._wait_for_room()
            batch = self._open
            if batch is None:
                batch = self._open = FutureBatch(time.monotonic() + self._max_delay)
                self._cond.notify_all()  # the flusher learns the new deadline
            future = MessageFuture(batch.condition)
            columns = batch.parts.get(partition)
            if columns is None:
                columns = batch.parts[partition] = MessageColumns()
                batch.futures[partition] = []
            # MessageColumns.add, inlined: a call is a tenth of this method's cost.
            columns.values.append(value)
            columns.keys.append(key)
            columns.properties.append(properties)
            columns.event_times.append(event_time)
            columns.sequence_ids.append(sequence_id)
            batch.futures[partition].append(future)
            batch.size += 1
            self._pending += 1
            if batch.size >= self._max_messages:
                self._seal()
        return future

    def _start(self) -> None:
        """Start the flusher thread (lock held); or raise why no message can be added."""
        self._raise_if_refusing()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        self._state = BatcherState.RUNNING
        at_exit.register(self)

    def _wait_for_room(self) -> None:
        if threading.current_thread() is self._thread:
            return  # a done callback sending more: waiting would wait for itself
        self._seal()  # what is buffered is all the flusher can make room with
        while self._pending >= self._max_pending and self._state is BatcherState.RUNNING:
            self._cond.wait()
        if self._failure is not None:
            raise self._failed_error()
        if self._state is BatcherState.CLOSED:
            msg = f"{self._name} was closed while a send waited for room"
            raise ProducerClosedError(msg)

    def _raise_if_refusing(self) -> None:
        """Raise why no message can be sent now, if so (lock held)."""
        if self._failure is not None:
            raise self._failed_error()
        if self._state is BatcherState.CLOSED:
            msg = f"{self._name} is closed: no message can be sent with it"
            raise ProducerClosedError(msg)

    def _failed_error(self) -> ProducerClosedError:
        """A new error for one caller, naming the first failure (lock held, failed)."""
        first = self._failure
        error = ProducerClosedError(
            f"{self._name} failed: {self._failed_messages} message(s) sent with it were not "
            f"appended (the future of each carries why); the first failure: {_describe(first)}. "
            "It sends nothing more: make a new producer"
        )
        error.__cause__ = first
        return error

    def check_open(self) -> None:
        """Raise what :meth:`add` would: a :class:`ProducerClosedError` once it failed or closed."""
        with self._cond:
            self._raise_if_refusing()

    def _seal(self) -> None:
        """Move the open batch to the append queue (lock held)."""
        batch = self._open
        if batch is None:
            return
        self._open = None
        self._sealed_count += 1
        batch.number = self._sealed_count
        self._sealed.append(batch)
        self._cond.notify_all()

    def _next(self) -> list[FutureBatch]:
        """The sealed batches to append now, waiting for one; ``[]`` once closed and drained.

        All that are sealed, up to ``MERGE_LIMIT`` messages: when appends fall
        behind, one transaction takes several batches, so that its fixed cost
        is shared by more messages rather than paid again for each batch.
        """
        while True:
            if self._sealed:
                taken = [self._sealed.popleft()]
                size = taken[0].size
                while self._sealed and size + self._sealed[0].size <= MERGE_LIMIT:
                    taken.append(self._sealed.popleft())
                    size += taken[-1].size
                return taken
            if self._open is not None:
                left = self._open.deadline - time.monotonic()
                if left <= 0:
                    self._seal()
                else:
                    self._cond.wait(left)
            elif self._state is BatcherState.CLOSED:
                return []
            else:
                self._cond.wait()

    def _run(self) -> None:
        batches: list[FutureBatch] = []
        try:
            while True:
                with self._cond:
                    batches = self._next()
                    failure = self._failure
                if not batches:
                    return
                if failure is None:
                    self._commit(batches)
                else:
                    self._refuse(batches, failure)
                batches = []
        except BaseException as exc:
            # A bug, not a failed append (_commit handles those): fail what is
            # left rather than leave futures that never resolve.
            self._fail_remaining(batches, exc)
            raise

    def _commit(self, batches: list[FutureBatch]) -> None:
        """Append ``batches`` in one transaction; resolve their futures and count them done."""
        try:
            ids = self._append(merged_parts(batches))
        except Exception as exc:
            size = sum(batch.size for batch in batches)
            exc.add_note(
                f"{self._name}: an append of {size} message(s) failed and appended none of "
                "them; the future of each carries this error; the producer sends nothing more"
            )
            # Failed before the futures resolve: a done callback sending more
            # is refused rather than queued behind the failure.
            with self._cond:
                self._fail(exc)
            for batch in batches:
                self._finished(batch, batch.resolve(None, exc))
            return
        for batch, mine in zip(batches, ids_by_batch(batches, ids), strict=True):
            batch.resolve(mine, None)
            self._finished(batch, 0)

    def _refuse(self, batches: list[FutureBatch], first: BaseException) -> None:
        """Fail ``batches`` untried: they were queued behind the append that failed first."""
        error = ProducerClosedError(
            f"{self._name}: not appended, as an earlier append failed ({_describe(first)}) "
            "and the producer sends nothing more"
        )
        error.__cause__ = first
        for batch in batches:
            self._finished(batch, batch.resolve(None, error))

    def _fail(self, failure: BaseException) -> None:
        """Record a failure (lock held): the first one is kept; no add is accepted from now on."""
        if self._failure is None:
            self._failure = failure
        if self._state is BatcherState.RUNNING:
            self._state = BatcherState.FAILED
        self._seal()  # what is buffered fails now rather than after the publish delay
        self._cond.notify_all()  # wakes sends waiting for room

    def _finished(self, batch: FutureBatch, failed: int) -> None:
        """Count ``batch`` done (once), ``failed`` of its messages failed."""
        with self._cond:
            if batch.finished:
                return
            batch.finished = True
            self._pending -= batch.size
            self._done_count = max(self._done_count, batch.number)
            self._failed_messages += failed
            self._cond.notify_all()

    def _fail_remaining(self, current: list[FutureBatch], cause: BaseException) -> None:
        with self._cond:
            self._fail(cause)
            self._state = BatcherState.CLOSED
            left = [*current, *self._sealed]
            self._sealed.clear()
        at_exit.discard(self)
        error = ProducerClosedError(f"{self._name}: the flusher thread stopped on an error")
        error.__cause__ = cause
        for batch in left:
            self._finished(batch, batch.resolve(None, error))

    def drain(self) -> None:
        """Wait until every message added so far is appended or failed; raise nothing."""
        with self._cond:
            if self._thread is None:
                return
            if threading.current_thread() is self._thread:
                msg = (
                    f"{self._name}: flush, close and send cannot wait for the producer from a "
                    "send_async callback, which runs on the thread they would wait for"
                )
                raise ConfigError(msg)
            self._seal()
            target = self._sealed_count
            while self._done_count < target:
                self._cond.wait()

    def flush(self) -> None:
        """Wait as :meth:`drain`; then, if the batcher has failed, raise ``ProducerClosedError``.

        Every call after the first failure raises, on every thread, a new
        error whose ``__cause__`` is that failure: sticky, because the
        batcher cannot tell whose messages a failed append held.
        """
        self.drain()
        with self._cond:
            if self._failure is not None:
                raise self._failed_error()

    def close(self) -> None:
        """Refuse new messages, append the buffered ones, stop the thread; then raise as :meth:`flush`.

        A second call (or one from another thread meanwhile) waits for the
        thread too, and raises again if the batcher failed; else it returns.
        """
        with self._cond:
            thread = self._thread
            if thread is not None and thread is threading.current_thread():
                msg = f"{self._name}: close cannot be called from a send_async callback"
                raise ConfigError(msg)
            if self._state is not BatcherState.CLOSED:
                self._state = BatcherState.CLOSED
                self._seal()
                self._cond.notify_all()
        if thread is not None:
            thread.join()
        at_exit.discard(self)
        with self._cond:
            if self._failure is not None:
                raise self._failed_error()


def _describe(error: BaseException | None) -> str:
    """``Type: first line of the message``, short enough for another error's message."""
    lines = str(error).splitlines()
    text = lines[0] if lines else ""
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
