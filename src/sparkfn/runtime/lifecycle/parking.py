"""Parking an idle query: while its input is quiet, a function runs no Spark query.

Every running Spark query with a Python source keeps a Python process of
Spark's on the driver (the source runner, 100-180 MB) and a trigger loop
in the JVM, whether or not anything arrives. A worker hosting dozens of
functions whose inputs are mostly quiet would spend most of its memory on
them. So a supervised query that has had nothing to do for a while is
*parked*: stopped, with the run ``PARKED`` (a state of the run's machine,
:data:`~sparkfn.runtime.lifecycle.states.RUN_TRANSITIONS`; its instances stay
``RUNNING``, and its objects, epoch and subscription stay as they are: nothing
is closed), and started again, ``RUNNING``, as soon as its input has
something. Both moves are recorded, as every transition is. Spark
restarts it from the same checkpoint and the reader plans from the
subscription's cursors, as after any restart, so parking changes when
work happens, never what is processed.

**Only a quiet query is stopped, and no batch is cut short.** A stop
interrupts a batch in flight: tolerable for the delivery of messages
(``effectively_once`` and ``at_least_once`` replay it from the cursors),
not for ``at_most_once`` (whose cursors moved when the batch was planned)
nor for the user's objects (a task killed midway closes nothing). Parking
therefore happens in one store transaction that

1. moves the run from ``RUNNING`` to ``PARKED`` (only if no stop is asked: a
   drain, suspend or cancel wins),
2. finds no batch in flight (the subscription's last plan is committed)
   and nothing pending (every input partition's end is at its cursor, and
   the retry topic's of a function that negative-acks: a redelivery waiting
   for its time has no commit to wake the query),

or changes nothing. From its commit on, the reader admits nothing, and a
batch whose ``latestOffset`` saw data just before it is planned empty: the
reader reads the run's state inside its planning transaction (locked on
PostgreSQL, as step 1 locks it), so the two transactions are ordered and
either the plan is there for step 2 to see, or the plan sees ``PARKED``. Only then is the query
stopped.

**Waking.** A parked query's supervisor is woken by its input topics'
commit hints (:mod:`sparkfn.store.watch`), and also looks every recheck
interval because a hint may be lost or unannounced; it starts the query
again when an input partition's end is past its cursor. A drain or suspend
of a parked run starts it again too: their end-of-stream batch is the
query's. The first message after a quiet spell waits for the query to
start (about a second), which is the price of an idle function that costs
nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import Connection

from sparkfn.api.errors import ConfigError, TopicNotFoundError
from sparkfn.runtime.lifecycle import control
from sparkfn.store import signals, watch
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.discovery import TopicDiscovery
from sparkfn.topics.log import end_offsets

_LOG = logging.getLogger("sparkfn.parking")

_RUNNING, _PARKED = frozenset({control.RUNNING}), frozenset({control.PARKED})


class _Busy(Exception):
    """The park transaction found work: it rolls back."""


class Parking:
    """When one supervised query parks, and when it starts again.

    Called on its supervisor's thread only. ``after`` is how long the query
    must have been quiet: no new plan, nothing pending.
    """

    def __init__(
        self,
        store: Store,
        *,
        control_id: str,
        subscription_name: str,
        inputs: Callable[[], list[str]],
        after: float,
        topics_pattern: str | None = None,
        retry_topic: str | None = None,
    ) -> None:
        self.store = store
        # A negative-acking function's retry topic (made on its first failure): a message
        # waiting there is pending, so the query never parks while one waits to be due.
        self._retry = retry_topic
        self.control_id = control_id
        self.subscription_name = subscription_name
        self.after = after
        self._inputs = inputs
        self._topics: list[TopicInfo] | None = None
        self._activity: subscription.Plan | None = None  # the last plan seen: a change is activity
        self._quiet_since = time.monotonic()
        self._flagged = False
        self._watching: list[Callable[[], None]] = []
        self._wake: Callable[[], None] | None = None  # what the watches call
        # A pattern's inputs are listed again when a topic is created, or every minute.
        self._discovery = (
            TopicDiscovery(store.url, str(store.data_dir), topics_pattern)
            if topics_pattern
            else None
        )

    def started(self) -> None:
        """The query (re)started: clear a park flag of ours, stop watching, quiet from now."""
        self.stop_watching()
        if self._flagged:
            with self.store.write() as conn:
                signals.hint_on_commit(conn, signals.control_hint(self.control_id))
                woken = control.move_run(
                    conn, self.control_id, control.RUNNING, "input arrived", only_from=_PARKED
                )
            if not woken:  # a stop of the parked run moved it on (PARKED -> STOPPING): it stands
                _LOG.debug("%s: started again while stopping; stays as it is", self.control_id)
            self._flagged = False
        self._topics = None  # a topics_pattern may match more topics now
        with self.store.read() as conn:
            self._activity = self._last_plan(conn)
        self._quiet_since = time.monotonic()

    def due(self) -> bool:
        """Whether the query has been quiet for :attr:`after` seconds (a read of the store)."""
        now = time.monotonic()
        if now - self._quiet_since < self.after:
            return False
        with self.store.read() as conn:
            activity = self._last_plan(conn)
            busy = self._busy(conn, activity)
        if busy or activity != self._activity:
            self._activity = activity
            self._quiet_since = now
            return False
        return True

    def park(self, wake: Callable[[], None]) -> bool:
        """Flag the run parked if no batch is in flight and nothing is pending.

        On ``True`` the caller stops the query; ``wake`` is then called
        whenever an input topic's commit hint is touched.
        """
        self.watch(wake)  # before the check, so that nothing committed after it goes unannounced
        try:
            with self.store.write() as conn:
                signals.hint_on_commit(conn, signals.control_hint(self.control_id))
                quiet = f"input quiet for {self.after:g} s"
                flagged = control.move_run(
                    conn, self.control_id, control.PARKED, quiet, only_from=_RUNNING
                )
                if not flagged or self._busy(conn, self._last_plan(conn)):
                    raise _Busy
        except _Busy:
            self.stop_watching()
            self._quiet_since = time.monotonic()
            return False
        self._flagged = True
        return True

    def has_input(self) -> bool:
        """While parked: whether an input partition has messages past its cursor."""
        with self.store.read() as conn:
            return self._pending(conn)

    def watch(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` when an input topic's hint is touched (where the kernel announces it)."""
        self._wake = wake
        self._watch(self._input_topics(), wake)

    def _watch(self, topics: list[TopicInfo], wake: Callable[[], None]) -> None:
        hints = [signals.topic_hint(topic.id) for topic in topics]
        if self._discovery is not None:
            hints.append(signals.TOPICS_HINT)  # a new topic may be an input with messages
        for hint in hints:
            cancel = watch.subscribe(self.store.data_dir, hint, wake)
            if cancel is not None:
                self._watching.append(cancel)

    def stop_watching(self) -> None:
        """Cancel the input hints' announcements."""
        for cancel in self._watching:
            cancel()
        self._watching.clear()

    # --- reading the store ------------------------------------------------------------
    def _input_topics(self) -> list[TopicInfo]:
        relist = False
        if self._discovery is not None and self._discovery.due():
            self._discovery.listed()
            relist = True
        if self._topics is None or relist:
            admin = TopicAdmin(self.store)
            self._topics = [admin.get(name) for name in self._inputs()]
            if relist and self._watching and self._wake is not None:
                self.stop_watching()  # watch the new topics too
                self._watch(self._topics, self._wake)
        return self._topics

    def _last_plan(self, conn: Connection) -> subscription.Plan | None:
        return subscription.read_plan(conn, self.subscription_name)

    def _busy(self, conn: Connection, plan: subscription.Plan | None) -> bool:
        in_flight = plan is not None and not plan.committed
        return in_flight or self._pending(conn)

    def _pending(self, conn: Connection) -> bool:
        """Some input partition's end is past its cursor, or it has no cursor and holds messages.

        A partition without a cursor is one of a topic the pattern gained
        since the query started: the query reads it from its first message.
        """
        try:
            topics = self._input_topics()
        except (TopicNotFoundError, ConfigError):  # gone, or the pattern matches nothing
            return True  # the query finds out and fails with a clear error
        cursors = subscription.cursors(conn, self.subscription_name)
        if self._retry is not None:
            found = TopicAdmin(self.store).get_many([self._retry], conn)
            topics = [*topics, *found.values()]
        for topic in topics:
            for part, (first, end) in end_offsets(conn, topic).items():
                if cursors.get((topic.id, part), first) < end:
                    return True
        return False
