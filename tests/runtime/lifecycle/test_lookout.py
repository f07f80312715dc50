"""When an idle supervisor looks at its record: the shared record watch is its only time net.

Spark-free: a real store, the real watch thread and the kernel's hint
announcements; no supervisor (what it would do at a look is tested in
test_lifecycle.py).
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import update

from sparkfn.api.lifecycle import DeathCause
from sparkfn.runtime.lifecycle import control, records
from sparkfn.runtime.lifecycle.lookout import Lookout, RecordWatch
from sparkfn.store import watch
from sparkfn.store.store import Store
from waiting import until

FN = "public/default/idle"


def _rows(store: Store) -> tuple[object, ...] | None:
    with store.read() as conn:
        return records.record_rows(conn, [FN, "public/default/none"]).get(FN)


def test_record_rows_change_with_every_change_of_the_record(store: Store) -> None:
    assert _rows(store) is None  # no record: none, as read_controls
    epoch = control.begin_run(store, FN, "function", 2, "started")
    first = _rows(store)
    assert first is not None and _rows(store) == first  # nothing changed: equal
    control.set_state(store, FN, control.RUNNING, "started", [control.FUNCTION, 0, 1])
    running = _rows(store)
    assert running != first
    control.record_death(store, FN, 1, DeathCause("E", "boom"), fatal=False, epoch=epoch)
    dead = _rows(store)
    assert dead != running
    control.mark_handled(store, FN, [1])
    assert _rows(store) != dead


def test_the_record_watch_wakes_on_a_change_whose_hint_was_lost(sqlite_store: Store) -> None:
    store = sqlite_store
    control.begin_run(store, FN, "function", 1, "started")
    wake = threading.Event()
    shared = RecordWatch.watch(store, FN, wake)
    try:
        # Once when it first reads the record: a change before that read would go unseen.
        until(wake.is_set, "the watch's first read of the record", 3 * shared.recheck)
        wake.clear()
        assert not wake.wait(shared.recheck + 1.0)  # nothing changed: nobody woken
        with store.write() as conn:  # a change without its hint (a crash before the touch)
            row = records.runs.c.fqfn == FN
            conn.execute(update(records.runs).where(row).values(stop_mode="drain"))
        until(wake.is_set, "the watch to see the unannounced change", 3 * shared.recheck)
    finally:
        shared.remove(FN)


def test_a_watched_supervisor_looks_only_when_woken_or_after_a_failed_look(
    sqlite_store: Store,
) -> None:
    store = sqlite_store
    if watch._LIBC is None:  # hints polled: the supervisor keeps its own time net
        return
    control.begin_run(store, FN, "function", 1, "started")
    wake = threading.Event()
    lookout = Lookout(store, FN, wake)
    try:
        lookout.recheck = 0.2  # its own wake-ups, shortened for the test
        assert lookout.due(stopping=False, ended=lambda: False)  # the first look: at once
        began = time.monotonic()
        while time.monotonic() - began < 1.0:  # woken by its timer only: no look
            assert not lookout.due(stopping=False, ended=lambda: False)
        lookout.failed()  # the look failed: made again at the next wake-up
        assert lookout.due(stopping=False, ended=lambda: False)
        assert not lookout.due(stopping=False, ended=lambda: False)
        assert lookout.due(stopping=False, ended=lambda: True)  # its target ended
        control.set_state(store, FN, control.RUNNING, "started")  # touches the run's hint
        until(
            lambda: lookout.due(stopping=False, ended=lambda: False),
            "a look after the record's hint was touched",
            10.0,
        )
    finally:
        lookout.close()
