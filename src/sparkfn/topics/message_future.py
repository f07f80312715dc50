"""The futures ``Producer.send_async`` returns: one per message, resolved a batch at a time.

A :class:`MessageFuture` is a :class:`concurrent.futures.Future` that
resolves to its message's id once the append of its batch committed, or
carries the exception that failed the append (every future of the batch
gets it). A message queued behind a failed append is not tried: its future
carries a :class:`~sparkfn.api.errors.ProducerClosedError` whose
``__cause__`` is that append's exception. The batcher (:mod:`sparkfn.topics.batching`) makes them and
finishes them; the futures of one batch share one condition, so they are
finished together under it and their waiters are woken once.

Threads: futures are finished, and their done callbacks run, on the
batcher's flusher thread; a callback added to a future already done runs at
once on the thread that adds it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, RUNNING
from typing import Any

from sparkfn.topics.append import MessageColumns

logger = logging.getLogger(__name__)


class MessageFuture(Future[str | None]):
    """The future of one message: resolved with the rest of its batch, all at once.

    ``Future()`` makes a condition variable (and a lock) per future, and two
    lists, which together cost more than the rest of a ``send_async``, the
    garbage collector's walks over them included. Here the futures of a batch
    share one condition, which is sound because they all resolve together
    (under it, every one is finished before any waiter wakes), and the lists
    are made only for a future that gets a callback or a waiter. Created
    running, as a message handed over cannot be taken back: ``cancel()``
    says ``False`` rather than promise what it cannot keep.
    """

    # Future.__init__ sets these per instance; until a future fails or gets a
    # callback or a waiter, the class's values serve every one.
    _exception: BaseException | None = None
    _done_callbacks: Sequence[Callable[[Future[str | None]], object]] = ()
    _waiter_list: Sequence[Any] = ()

    def __init__(self, condition: threading.Condition) -> None:
        self._condition = condition
        # Set here although finish() sets them again: an attribute an object
        # gets only later costs it a dictionary of its own, then.
        self._state = RUNNING
        self._result: str | None = None

    @property
    def _waiters(self) -> list[Any]:
        # concurrent.futures.wait and as_completed add and remove their
        # waiters through this list: it is made for the first of them.
        if not isinstance(self._waiter_list, list):
            self._waiter_list = []
        return self._waiter_list

    @_waiters.setter
    def _waiters(self, waiters: list[Any]) -> None:
        self._waiter_list = waiters

    def add_done_callback(self, fn: Callable[[Future[str | None]], object]) -> None:
        """Call ``fn(future)`` once it is done (now, if it is), on the thread that finished it."""
        with self._condition:
            if self._state != FINISHED:
                self._done_callbacks = [*self._done_callbacks, fn]
                return
        try:
            fn(self)
        except Exception:
            logger.exception("exception calling callback for %r", self)

    def finish(self, result: str | None, error: BaseException | None) -> bool:
        """Set the outcome; whether it has callbacks to run (see :meth:`run_callbacks`).

        The caller holds the condition and notifies once for the batch.
        """
        if self._state == FINISHED:
            return False
        if error is None:
            self._result = result
        else:
            self._exception = error
        self._state = FINISHED
        for waiter in self._waiter_list:
            if error is None:
                waiter.add_result(self)
            else:
                waiter.add_exception(self)
        return bool(self._done_callbacks)

    def run_callbacks(self) -> None:
        """Call the done callbacks, once finished and outside the condition."""
        for callback in self._done_callbacks:
            try:
                callback(self)
            except Exception:
                logger.exception("exception calling callback for %r", self)


class FutureBatch:
    """Messages a batcher buffered together, per partition, and their futures, in add order.

    The futures share :attr:`condition`, so they finish together (:meth:`resolve`).
    """

    __slots__ = ("condition", "deadline", "finished", "futures", "number", "parts", "size")

    def __init__(self, deadline: float) -> None:
        self.parts: dict[int, MessageColumns] = {}
        self.futures: dict[int, list[MessageFuture]] = {}  # row for row with parts
        self.size = 0
        self.condition = threading.Condition()  # shared by the futures (see MessageFuture)
        self.deadline = deadline  # time.monotonic() by which it is sealed
        self.number = 0  # set when sealed: 1, 2, 3, ... in commit order
        self.finished = False  # counted done by the batcher

    def resolve(self, ids: dict[int, list[str | None]] | None, error: BaseException | None) -> int:
        """Finish every future: with its id, or with ``error``; then run their callbacks.

        Returns how many futures it failed (those already done keep their outcome).
        """
        with_callbacks = []
        failed = 0
        with self.condition:
            for part, futures in self.futures.items():
                if ids is None:
                    for future in futures:
                        if (
                            future.done()
                        ):  # a crash after it was resolved: see Batcher._fail_remaining
                            continue
                        failed += 1
                        if future.finish(None, error):
                            with_callbacks.append(future)
                else:
                    for future, message_id in zip(futures, ids[part], strict=True):
                        if future.finish(message_id, None):
                            with_callbacks.append(future)
            self.condition.notify_all()
        for future in with_callbacks:
            future.run_callbacks()
        return failed


def merged_parts(batches: list[FutureBatch]) -> dict[int, MessageColumns]:
    """The messages of ``batches`` per partition, in batch order: what one append takes."""
    if len(batches) == 1:
        return batches[0].parts
    parts: dict[int, MessageColumns] = {}
    for batch in batches:
        for part, columns in batch.parts.items():
            parts.setdefault(part, MessageColumns()).extend(columns)
    return parts


def ids_by_batch(
    batches: list[FutureBatch], ids: dict[int, list[str | None]]
) -> list[dict[int, list[str | None]]]:
    """Each batch's share of the ids one append of :func:`merged_parts` gave, per partition."""
    taken = dict.fromkeys(ids, 0)  # per partition, the ids given to earlier batches
    shares = []
    for batch in batches:
        mine = {}
        for part, futures in batch.futures.items():
            start = taken[part]
            taken[part] = start + len(futures)
            mine[part] = ids[part][start : start + len(futures)]
        shares.append(mine)
    return shares
