"""When a supervisor looks at its run's lifecycle record: :class:`Lookout`.

An idle run's record rarely changes, and reading it from the store is most
of what an idle supervisor costs. So a supervisor reads it only when

* it was woken: a stop was asked, its target ended (a query's
  ``awaitTermination`` returned), or the record's commit hint was touched
  (a death, a state, a command; announced by the kernel where it can,
  :func:`sparkfn.store.watch.subscribe`);
* the hint changed since the last look (where hints are polled, every
  :data:`POLL_SECONDS`);
* a stop is in progress (every :data:`POLL_SECONDS`, until it completes);
* its target says it ended by itself;
* or :func:`~sparkfn.store.signals.recheck_seconds` passed since the last
  look, because a hint may be lost or unannounced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sparkfn.store import signals, watch
from sparkfn.store.store import Store

POLL_SECONDS = 0.2


class Lookout:
    """The wake-ups of one supervisor's thread, and whether each calls for a look."""

    def __init__(self, store: Store, control_id: str, wake: threading.Event) -> None:
        self.store = store
        self.hint = [signals.control_hint(control_id)]
        self.wake = wake
        self.recheck = signals.recheck_seconds(store.url)
        self._cancel = watch.subscribe(store.data_dir, self.hint[0], wake.set)
        self._seen: tuple[int, ...] = ()
        self._looked = 0.0
        # The first look is at once: what happened before the subscription
        # (a death right after launch) was announced to no one.
        wake.set()

    def due(self, *, stopping: bool, ended: Callable[[], bool]) -> bool:
        """Wait for the next wake-up; whether the supervisor should look at its record now."""
        quiet = self._cancel is not None and not stopping
        woken = self.wake.wait(self.recheck if quiet else POLL_SECONDS)
        self.wake.clear()
        seen = signals.stamp(self.store.data_dir, self.hint)
        if not (
            woken
            or seen != self._seen
            or stopping
            or time.monotonic() - self._looked >= self.recheck
            or ended()
        ):
            return False
        self._seen, self._looked = seen, time.monotonic()
        return True

    def close(self) -> None:
        """Stop the kernel's announcements to this supervisor."""
        if self._cancel is not None:
            self._cancel()
