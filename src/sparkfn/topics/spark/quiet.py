"""An idle reader's wait: "nothing new" answered from commit hints, not from the store.

Spark asks an idle query's reader for its latest offset again after every
``pollingDelay``. While the reader's last answer was "nothing new" for the
same start offsets and is younger than
:func:`~sparkfn.store.signals.recheck_seconds`, :meth:`QuietWait.nothing_new`
waits, up to :data:`RUN_WAIT_SECONDS` (a function's or a sink's query) or
:data:`IDLE_WAIT_SECONDS` (any other), for one of the reader's commit hints
to change: an input topic's, the run's lifecycle record's, or the topic
creations' of a ``topicsPattern`` (:mod:`sparkfn.store.signals`,
:mod:`sparkfn.store.watch`). If none does, the answer is "nothing new"
again without asking the store. So an idle function's query costs Spark one
call every 2 s, not ten a second, and new input is seen as soon as its
commit touches the hint (inotify), or within :data:`HINT_POLL_SECONDS`
where hints are polled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from sparkfn.store import signals, watch

T = TypeVar("T")
R = TypeVar("R")

# How long one call of an idle reader waits for a commit hint: a query of a
# function or a sink (every stop of which touches its run's hint), and any
# other (whose query.stop() waits for the call). Where hints are polled, how
# often it looks. It asks the store at least every signals.recheck_seconds.
RUN_WAIT_SECONDS = 2.0
NET_CPU_SHARE = signals.NET_CPU_SHARE  # see signals.net_pause
IDLE_WAIT_SECONDS = 0.5
HINT_POLL_SECONDS = 0.05


class QuietWait:
    """The hints one reader waits on, and its last "nothing new" answer.

    Lives in the driver's reader, called on Spark's thread only.
    """

    def __init__(
        self, data_dir: Path, hints: Iterable[str], *, recheck: float, wait: float
    ) -> None:
        self.data_dir = data_dir
        self.hints = list(hints)
        self.recheck = recheck
        self._base_recheck = recheck
        self._cost = 0.0  # CPU seconds of the last look (look())
        self.wait = wait
        # (start, hints, when) of the last "nothing new" answer.
        self._idle: tuple[dict[str, int], tuple[int, ...], float] | None = None
        self._stamp: tuple[int, ...] = ()
        # Stamped again only after a touch the kernel announced, where it announces them all.
        announced = recheck >= signals.LOCAL_RECHECK_SECONDS
        self._stamps = watch.HintStamps(data_dir, announced=announced)

    @property
    def idle(self) -> bool:
        """Whether the last answer was "nothing new"."""
        return self._idle is not None

    def watch(self, hints: Iterable[str]) -> None:
        """Wait on these hints too (a topic the reader gained)."""
        self.hints.extend(hints)

    def nothing_new(self, start: Mapping[str, int]) -> bool:
        """``True``: answer ``start`` again, no hint changed (after waiting for one).

        ``False``: the caller asks the store, then reports its answer to
        :meth:`answered`.
        """
        stamp = self._stamps.now(self.hints)
        idle = self._idle
        if idle is not None and idle[0] == start and idle[1] == stamp:
            left = self.recheck - (time.monotonic() - idle[2])
            if left > 0:
                wait = min(left, self.wait)
                stamp = self._stamps.wait(self.hints, stamp, wait, HINT_POLL_SECONDS)
                if stamp == idle[1] and wait < left:
                    return True
        self._stamp = stamp
        return False

    def look(self, ask: Callable[[T], R], start: T) -> R:
        """``ask(start)``: the look at the store, its CPU time kept for :meth:`answered`."""
        began = time.thread_time()
        try:
            return ask(start)
        finally:
            self._cost = time.thread_time() - began

    def answered(self, start: Mapping[str, int], end: Mapping[str, int]) -> None:
        """The store's answer for ``start``: "nothing new" if ``end`` equals it.

        Where hints are announced (the local store's recheck), a costly look
        (:meth:`look`) that found nothing spaces the next net look, to keep
        the net under :data:`NET_CPU_SHARE` of a core.
        """
        if end == start:
            self.recheck = signals.net_pause(self._base_recheck, self._cost)
        self._cost = 0.0
        self._idle = (dict(start), self._stamp, time.monotonic()) if end == start else None
