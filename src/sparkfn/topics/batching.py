"""Client-side batching for ``Producer.send_async``, as Pulsar's producers batch.

Messages are buffered in an open batch. The batch is sealed when it holds
``max_messages`` or ``max_delay`` seconds after its first message, and sealed
batches are appended in order by one flusher thread: one store transaction
per batch instead of per message (or per several batches, when they are
sealed faster than they are appended), and the offsets of a partition
follow the order in which the messages were added.

Each message gets a :class:`~sparkfn.topics.message_future.MessageFuture`
that resolves to its id once its append committed, or carries the exception
that failed the append (every future of it gets it, and the next
:meth:`Batcher.flush` raises it: nothing is dropped silently).

Threads: :meth:`Batcher.add` may be called from any number of threads. The
flusher thread is started by the first ``add``, is a daemon, and ends in
:meth:`Batcher.close`, which joins it. Futures resolve, and their done
callbacks run, on the flusher thread: a callback must not wait for the
producer (``flush``, ``close``), or it would wait for itself.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 (see _register_exit_hook below)
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime
from enum import Enum

from sparkfn.api.errors import ConfigError, ProducerClosedError
from sparkfn.topics.append import MessageColumns
from sparkfn.topics.message_future import MessageFuture

logger = logging.getLogger(__name__)

# Messages one append takes at most when it merges sealed batches (see Batcher._next).
MERGE_LIMIT = 20_000

# Appends sealed batches' messages; returns each partition's ids in row order.
AppendBatch = Callable[[dict[int, MessageColumns]], dict[int, list[str | None]]]


class BatcherState(Enum):
    """Where a batcher is in its life."""

    IDLE = "idle"  # nothing sent asynchronously yet: no thread
    RUNNING = "running"  # the flusher thread runs; adds are accepted
    CLOSED = "closed"  # close() was called: adds are refused; the thread ends once drained


class _Batch:
    """Messages buffered together, per partition, and their futures, in add order."""

    __slots__ = ("condition", "deadline", "futures", "number", "parts", "size")

    def __init__(self, deadline: float) -> None:
        self.parts: dict[int, MessageColumns] = {}
        self.futures: dict[int, list[MessageFuture]] = {}  # row for row with parts
        self.size = 0
        self.condition = threading.Condition()  # shared by the futures (see MessageFuture)
        self.deadline = deadline  # time.monotonic() by which it is sealed
        self.number = 0  # set when sealed: 1, 2, 3, ... in commit order

    def resolve(self, ids: dict[int, list[str | None]] | None, error: BaseException | None) -> None:
        """Finish every future: with its id, or with ``error``; then run their callbacks."""
        with_callbacks = []
        with self.condition:
            for part, futures in self.futures.items():
                if ids is None:
                    for future in futures:
                        if future.finish(None, error):
                            with_callbacks.append(future)
                else:
                    for future, message_id in zip(futures, ids[part], strict=True):
                        if future.finish(message_id, None):
                            with_callbacks.append(future)
            self.condition.notify_all()
        for future in with_callbacks:
            future.run_callbacks()


class Batcher:
    """Buffers messages into batches and appends them on a background thread.

    ``append`` appends one batch atomically (for a producer:
    :func:`sparkfn.topics.append.append` on its topic). ``max_pending`` bounds
    the messages buffered and not yet appended (0: no bound); ``add`` blocks
    while it is reached, so a sender cannot outrun the store by more.
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
        self._open: _Batch | None = None
        self._sealed: deque[_Batch] = deque()
        self._sealed_count = 0  # number of the last batch sealed
        self._done_count = 0  # number of the last batch appended or failed
        self._pending = 0  # messages added and not yet appended or failed
        self._failure: BaseException | None = None  # first failure since the last flush
        self._failed_messages = 0

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
                batch = self._open = _Batch(time.monotonic() + self._max_delay)
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
        if self._state is BatcherState.CLOSED:
            msg = f"{self._name} is closed: no message can be sent with it"
            raise ProducerClosedError(msg)
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        self._state = BatcherState.RUNNING
        _open_batchers.add(self)

    def _wait_for_room(self) -> None:
        if threading.current_thread() is self._thread:
            return  # a done callback sending more: waiting would wait for itself
        self._seal()  # what is buffered is all the flusher can make room with
        while self._pending >= self._max_pending and self._state is BatcherState.RUNNING:
            self._cond.wait()
        if self._state is BatcherState.CLOSED:
            msg = f"{self._name} was closed while a send waited for room"
            raise ProducerClosedError(msg)

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

    def _next(self) -> list[_Batch]:
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
        batches: list[_Batch] = []
        try:
            while True:
                with self._cond:
                    batches = self._next()
                if not batches:
                    return
                self._commit(batches)
                batches = []
        except BaseException as exc:
            # A bug, not a failed append (_commit handles those): fail what is
            # left rather than leave futures that never resolve.
            self._fail_remaining(batches, exc)
            raise

    def _commit(self, batches: list[_Batch]) -> None:
        """Append ``batches`` in one transaction; resolve their futures and count them done."""
        parts = batches[0].parts
        if len(batches) > 1:
            parts = {}
            for batch in batches:
                for part, columns in batch.parts.items():
                    parts.setdefault(part, MessageColumns()).extend(columns)
        try:
            ids = self._append(parts)
        except Exception as exc:
            size = sum(batch.size for batch in batches)
            exc.add_note(
                f"{self._name}: an append of {size} message(s) failed and appended none of "
                "them; the future of each carries this error"
            )
            for batch in batches:
                batch.resolve(None, exc)
                self._finished(batch, exc)
            return
        taken = dict.fromkeys(ids, 0)  # per partition, the ids given to earlier batches
        for batch in batches:
            mine = {}
            for part, futures in batch.futures.items():
                start = taken[part]
                taken[part] = start + len(futures)
                mine[part] = ids[part][start : start + len(futures)]
            batch.resolve(mine, None)
            self._finished(batch, None)

    def _finished(self, batch: _Batch, failure: BaseException | None) -> None:
        with self._cond:
            self._pending -= batch.size
            self._done_count = batch.number
            if failure is not None:
                self._failed_messages += batch.size
                if self._failure is None:
                    self._failure = failure
            self._cond.notify_all()

    def _fail_remaining(self, current: list[_Batch], cause: BaseException) -> None:
        with self._cond:
            self._state = BatcherState.CLOSED
            self._seal()
            left = [*current, *self._sealed]
            self._sealed.clear()
        _open_batchers.discard(self)
        error = ProducerClosedError(f"{self._name}: the flusher thread stopped on an error")
        error.__cause__ = cause
        for batch in left:
            batch.resolve(None, error)  # those already finished keep their outcome
            self._finished(batch, error)

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
        """Wait as :meth:`drain`, then raise the first append failure since the last flush."""
        self.drain()
        with self._cond:
            failure, failed = self._failure, self._failed_messages
            self._failure, self._failed_messages = None, 0
        if failure is not None:
            if failed:
                failure.add_note(f"{self._name}: {failed} message(s) failed since the last flush")
            raise failure

    def close(self) -> None:
        """Refuse new messages, append the buffered ones, stop the thread; then as :meth:`flush`.

        Idempotent: a second call returns at once.
        """
        with self._cond:
            if self._state is BatcherState.CLOSED:
                return
            thread = self._thread
            if thread is not None and thread is threading.current_thread():
                msg = f"{self._name}: close cannot be called from a send_async callback"
                raise ConfigError(msg)
            self._state = BatcherState.CLOSED
            self._seal()
            self._cond.notify_all()
        if thread is not None:
            thread.join()
        _open_batchers.discard(self)
        self.flush()


# Batchers with a running thread: closed when the interpreter exits, so that
# what was buffered in the last moments is appended rather than lost with the
# daemon thread.
_open_batchers: set[Batcher] = set()


def _close_open_batchers() -> None:
    for batcher in list(_open_batchers):
        try:
            batcher.close()
        except Exception:
            logger.exception("%s: closing at interpreter exit failed", batcher.name)


# threading's exit hooks run when the main thread ends, before atexit's, with
# the interpreter whole. A module imported first during them cannot register
# a hook of its own; pyarrow's first pa.array imports pandas, which imports
# concurrent.futures.thread, which registers one: that is why it is imported
# above, so that a producer's first append may happen at exit.
_register_exit_hook = getattr(threading, "_register_atexit", atexit.register)
_register_exit_hook(_close_open_batchers)
