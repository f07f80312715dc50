"""When a supervisor looks at its run's lifecycle record: :class:`Lookout`.

An idle run's record rarely changes, and reading it from the store is most
of what an idle supervisor costs. So a supervisor reads it only when

* it was woken: a stop was asked, its target ended (a query's
  ``awaitTermination`` returned), the record's commit hint was touched
  (a death, a state, a command; announced by the kernel where it can,
  :func:`sparkfn.store.watch.subscribe`), or the shared :class:`RecordWatch`
  saw the record change;
* the hint changed since the last look (where hints are polled, every
  :data:`POLL_SECONDS`);
* a stop is in progress (every :data:`POLL_SECONDS`, until it completes);
* its target says it ended by itself;
* its last look failed (again after its recheck);
* or, where no :class:`RecordWatch` stands in for it (hints are polled, or
  its target is tended at each look), :func:`~sparkfn.store.signals.recheck_seconds`
  passed since the last look, because a hint may be lost or unannounced.

Where hints are announced, the net for a lost hint is the one
:class:`RecordWatch` thread of the store: it reads every watched record in
one query and wakes the supervisors whose record changed. A supervisor's
own thread then only wakes every ``recheck`` x :data:`OWN_RECHECK_FACTOR`
to ask its target whether it ended, without reading the store: with a
thousand idle functions the time-based reads of each supervisor, one per
minute each, were most of the worker's idle CPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sparkfn.runtime.lifecycle import records
from sparkfn.store import signals, watch
from sparkfn.store.store import Store

POLL_SECONDS = 0.2
# How much longer than recheck_seconds an idle supervisor waits on its own
# (to ask its target whether it ended; a failed look is made again then),
# once the shared RecordWatch reads its record for it.
OWN_RECHECK_FACTOR = 12

_UNSEEN = object()  # a record the RecordWatch has not read yet


class RecordWatch:
    """One thread per store that reads every idle supervisor's record in one query.

    An idle supervisor read its run's record from the store every
    :func:`~sparkfn.store.signals.recheck_seconds` in case a hint was lost:
    with a thousand functions on a worker (a query group's members), two
    hundred reads a second. This thread reads all of them in one query
    (:func:`~sparkfn.runtime.lifecycle.records.record_rows`, undecoded)
    every ``recheck`` (spaced by :func:`~sparkfn.store.signals.net_pause`) and wakes the
    supervisors whose record changed, and each supervisor once when it first
    reads its record (a change between the supervisor's first look and that
    read would otherwise go unseen if its hint was lost). It is the only
    time-based net of a supervisor it watches (see :class:`Lookout`).
    """

    _by_store: dict[int, RecordWatch] = {}  # by id() of the store
    _lock = threading.Lock()

    def __init__(self, store: Store) -> None:
        self.store = store
        self.recheck = signals.recheck_seconds(store.url)
        self._watched: dict[str, tuple[threading.Event, object]] = {}
        self._mine = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="sparkfn-record-watch", daemon=True)
        self._thread.start()

    @classmethod
    def watch(cls, store: Store, control_id: str, wake: threading.Event) -> RecordWatch:
        """Wake ``wake`` when ``control_id``'s record in ``store`` changes; the watch doing it."""
        with cls._lock:
            found = cls._by_store.get(id(store))
            if found is None:
                found = cls._by_store[id(store)] = cls(store)
            with found._mine:
                found._watched[control_id] = (wake, _UNSEEN)
            return found

    def remove(self, control_id: str) -> None:
        """Stop watching ``control_id`` (the thread ends with its last one)."""
        with self._mine:
            self._watched.pop(control_id, None)

    def _run(self) -> None:
        pause = self.recheck
        while True:
            time.sleep(pause)
            began = time.thread_time()
            with RecordWatch._lock, self._mine:
                ids = list(self._watched)
                if not ids:  # nobody left: the next watch() starts a new thread
                    if RecordWatch._by_store.get(id(self.store)) is self:
                        del RecordWatch._by_store[id(self.store)]
                    return
            try:
                with self.store.read() as conn:
                    rows = records.record_rows(conn, ids)
            except Exception:  # noqa: BLE001 - a closed or failing store: read at the next round,
                continue  # which compares with the last records read (a change is seen then)
            with self._mine:
                for cid in ids:
                    entry = self._watched.get(cid)
                    if entry is None:
                        continue
                    wake, seen = entry
                    now = rows.get(cid)
                    if seen is _UNSEEN or now != seen:
                        wake.set()
                    self._watched[cid] = (wake, now)
            pause = signals.net_pause(self.recheck, time.thread_time() - began)


class Lookout:
    """The wake-ups of one supervisor's thread, and whether each calls for a look."""

    def __init__(
        self, store: Store, control_id: str, wake: threading.Event, *, shared: bool = True
    ) -> None:
        """``shared``: the shared :class:`RecordWatch` may stand in for this supervisor's
        own rechecks (not when its target needs tending at every look: a parking query)."""
        self.store = store
        self.hint = [signals.control_hint(control_id)]
        self.wake = wake
        self.recheck = signals.recheck_seconds(store.url)
        self._cancel = watch.subscribe(store.data_dir, self.hint[0], wake.set)
        self.control_id = control_id
        self._shared: RecordWatch | None = None
        if shared and self._cancel is not None:  # hints are announced: the shared watch is the net
            self._shared = RecordWatch.watch(store, control_id, wake)
            self.recheck *= OWN_RECHECK_FACTOR
        self._seen: tuple[int, ...] = ()
        self._looked = 0.0
        self._again = False  # the last look failed: look again after the recheck
        # The first look is at once: what happened before the subscription
        # (a death right after launch) was announced to no one.
        wake.set()

    def due(self, *, stopping: bool, ended: Callable[[], bool]) -> bool:
        """Wait for the next wake-up; whether the supervisor should look at its record now."""
        quiet = self._cancel is not None and not stopping
        woken = self.wake.wait(self.recheck if quiet else POLL_SECONDS)
        self.wake.clear()
        seen = signals.stamp(self.store.data_dir, self.hint)
        # With the shared watch, the time-based net is its reads, not this thread's.
        timed = self._shared is None or self._again
        if not (
            woken
            or seen != self._seen
            or stopping
            or (timed and time.monotonic() - self._looked >= self.recheck)
            or ended()
        ):
            return False
        self._seen, self._looked, self._again = seen, time.monotonic(), False
        return True

    def failed(self) -> None:
        """The look :meth:`due` allowed failed (the store unreachable a moment): the
        next comes after the recheck at the latest, even where nothing wakes it."""
        self._again = True

    def close(self) -> None:
        """Stop the kernel's announcements to this supervisor, and the shared watch's."""
        if self._cancel is not None:
            self._cancel()
        if self._shared is not None:
            self._shared.remove(self.control_id)
