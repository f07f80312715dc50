"""A function's or a sink's Spark query as a :class:`~.target.RunTarget`.

The query's instances are not threads of this process: they are Spark tasks
in Python worker processes, reached through the run's control record
(:mod:`sparkfn.runtime.lifecycle.control`):

* drain / suspend: the reader stops admitting input (drain: after the offsets
  present when the drain was asked) and plans one end-of-stream batch in
  which every live instance calls ``prepare_to_shutdown()``; the stop is
  complete once the sink has committed it;
* cancel: the reader admits nothing, running tasks are interrupted at their
  next batch boundary (closing their objects on the way out), then the query
  is stopped;
* one instance's drain or suspend (:meth:`QueryTarget.begin_leave`): it is
  ``STOPPING``, so the reader plans no more input for it (its share goes to
  the others); it has left once the batch planned last when it stopped
  taking input has committed (a drain first waits for the subscription to
  reach the input's ends as of the drain, :meth:`QueryTarget.reached`);
* closing: every worker process's control thread (:mod:`sparkfn.runtime.lifecycle.workerctl`)
  is told to close the instances' objects and acknowledges each one.

A death stops the whole query; a relaunch starts it again in a new epoch,
and the reader gives the share of instances that stay down to the others.

With ``parking`` (:mod:`.parking`), a query quiet for a while is stopped
and started again, in the same epoch, when its input has something.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkfn.api.errors import NotFoundError
from sparkfn.api.lifecycle import StopMode
from sparkfn.runtime.lifecycle import control, objects
from sparkfn.runtime.lifecycle.parking import Parking
from sparkfn.runtime.lifecycle.target import Ended
from sparkfn.runtime.spark.liveness import jvm_death
from sparkfn.store import signals, watch
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.spark.planning import offset_key
from sparkfn.topics.spark.source import current_ends

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

_LOG = logging.getLogger("sparkfn.supervisor")

POLL_SECONDS = 0.1
# How long a cancel lets running tasks reach a batch boundary (closing their
# objects on the way out) before Spark kills their workers.
CANCEL_GRACE_SECONDS = 3.0

# How long a Py4J failure waits for the JVM's exit, to tell a dead JVM from a passing error.
JVM_EXIT_SECONDS = 2.0

StartQuery = Callable[[int], "StreamingQuery"]  # epoch -> the started query


class QueryTarget:
    """One Spark streaming query (a function's or a sink's) under a supervisor."""

    restarts_whole = True

    def __init__(
        self,
        store: Store,
        *,
        kind: str,
        name: str,
        control_id: str,
        parallelism: int,
        start_query: StartQuery,
        inputs: Callable[[], list[str]],
        parking: Parking | None = None,
    ) -> None:
        self.store = store
        self.kind = kind
        self.name = name
        self.control_id = control_id
        self.parallelism = parallelism
        self._start_query = start_query
        self._inputs = inputs
        self.query: StreamingQuery | None = None
        self.final_seq = 0
        self.on_end: Callable[[], None] | None = None  # called when a query terminates
        self.parking = parking
        self.parked = False  # stopped by parking; the run goes on
        self._terminated: StreamingQuery | None = None
        self._epoch = 0
        self.subscription: str | None = None  # the query's subscription (one instance's stop)

    def launch(self, epoch: int, instances: list[int]) -> None:
        """Start the query in ``epoch`` (the reader reads which instances are live)."""
        self.parked = False
        if self.parking is not None:
            self.parking.started()
        self._epoch = epoch
        query = self._start_query(epoch)
        self.query = query
        threading.Thread(
            target=self._await, args=(query,), name=f"sparkfn-query-{self.control_id}", daemon=True
        ).start()

    def _await(self, query: StreamingQuery) -> None:
        """Wait for ``query`` to terminate in the JVM, then say so: no polling of
        ``isActive`` while it runs (a Py4J round trip each, for every idle query)."""
        try:
            query.awaitTermination()
        except Exception:  # noqa: BLE001 - failed or the session is gone: it terminated
            pass
        self._terminated = query
        if self.on_end is not None:
            self.on_end()

    def stop_point(self, mode: StopMode) -> dict[str, int] | None:
        """Drain: the input topics' ends now (a quick read of the store)."""
        return current_ends(self.store, self._inputs()) if mode is StopMode.DRAIN else None

    def tend(self) -> bool:
        """Park the query once it has been quiet long enough; ``True``: parked, with input now."""
        parking = self.parking
        if parking is None:
            return False
        if self.parked:
            return parking.has_input()
        query = self.query
        if query is None or self._terminated is query or not parking.due():
            return False
        if parking.park(self.on_end or (lambda: None)):
            _LOG.info(
                "%s %s: input quiet for %g s; parking its query",
                self.kind,
                self.name,
                parking.after,
            )
            try:
                self._stop(query)
            finally:  # parked once the query is stopped, as whoever reads the flag expects
                self.parked = True
        return False

    def begin_stop(self, mode: StopMode, point: Any, cause: str) -> bool:
        """Ask the reader for the final batch; ``False`` if the query does not run."""
        if self.parked:  # the end-of-stream batch is the query's
            try:
                self.launch(self._epoch, [])
            except Exception:  # noqa: BLE001 - the stop ends without it
                _LOG.exception(
                    "%s %s: its parked query did not start for the %s", self.kind, self.name, mode
                )
                return False
        if not self._active():
            return False
        self.final_seq = control.request_stop(
            self.store, self.control_id, mode, point, epoch=self._epoch
        )
        return True

    def stopped(self, record: control.RunControl) -> bool:
        """The sink committed the end-of-stream batch (the latest asked: a poison hunt
        in a drain's final batch asks again, :func:`~.control.renew_final`), or there is
        none to wait for: no instance takes input and the batch planned last committed.

        An instance that stopped alone, or is stopping alone (``STOPPING``), takes no
        input, and the reader plans nothing, an end-of-stream batch included, for a run
        none of whose instances does. Once the run's stop is asked no instance starts
        to leave (the supervisor's thread begins leaves only while the run runs), so
        ``record`` (read before the plan) names every instance that may still get a
        batch; when it names none, the run is stopped as soon as the batch that the
        instances still leaving may be in has committed (:meth:`left`), and the run's
        end closes what is left gracefully.
        """
        if record.final_committed >= max(self.final_seq, record.final_seq):
            return True
        return not record.live(self.parallelism) and self._nothing_in_flight()

    def _nothing_in_flight(self) -> bool:
        """Whether the subscription's batch planned last has committed (or there is none)."""
        if self.subscription is None:
            return True
        with self.store.read() as conn:
            plan = subscription.read_plan(conn, self.subscription)
        return plan is None or plan.committed

    def cancel(self, cause: str, epoch: int) -> None:
        """Interrupt running tasks, then stop the query."""
        objects.issue_command(
            self.store, self.control_id, "cancel", list(range(self.parallelism)), epoch
        )
        self._unpark()
        query = self.query
        if query is not None and query.isActive:
            deadline = time.monotonic() + CANCEL_GRACE_SECONDS
            while time.monotonic() < deadline and query.isActive:
                if not query.status.get("isTriggerActive", False):
                    break
                time.sleep(POLL_SECONDS)
            self._stop(query)

    def halt(self) -> None:
        """Stop the query (a death stops every instance until the relaunch)."""
        self._unpark()
        query = self.query
        if query is not None and query.isActive:
            self._stop(query)

    def _stop(self, query: StreamingQuery) -> None:
        # An idle reader may be waiting in latestOffset for a commit hint, and
        # Spark's stop waits for that call: the touch ends the wait at once.
        signals.touch(self.store.data_dir, signals.control_hint(self.control_id))
        query.stop()

    def _unpark(self) -> None:
        """The run stops or restarts: a parked query stays stopped, its input unwatched."""
        self.parked = False
        if self.parking is not None:
            self.parking.stop_watching()

    def retire(self, instances: list[int]) -> None:
        """Nothing to do: the reader leaves out instances whose state is final."""

    def reached(self, point: Any) -> bool:
        """Whether the subscription's cursors are at or past ``point`` (a drain's ends).

        Everything in the input up to ``point`` has then been processed
        (committed) by the instances it was dealt to.
        """
        if not point or self.subscription is None:
            return True
        admin = TopicAdmin(self.store)
        keys: dict[str, tuple[int, int]] = {}
        for name in self._inputs():
            try:
                topic = admin.get(name)
            except NotFoundError:
                continue  # deleted since: nothing of it to wait for
            for part in range(topic.partitions):
                keys[offset_key(topic, part)] = (topic.id, part)
        with self.store.read() as conn:
            cursors = subscription.cursors(conn, self.subscription)
        return all(
            cursors.get(keys[key], 0) >= end
            for key, end in point.items()
            if end > 0 and key in keys
        )

    def begin_leave(self, instance: int, mode: StopMode) -> Any:
        """The instance is ``STOPPING`` (the reader plans nothing more for it): the batch
        it may still be in, the subscription's plan if that is not committed yet."""
        if self.subscription is None:
            return None
        with self.store.read() as conn:
            plan = subscription.read_plan(conn, self.subscription)
        if plan is None or plan.committed:
            return None
        return (plan.epoch, plan.spark_start, plan.spark_end)

    def left(self, instance: int, batch: Any) -> bool:
        """Whether ``batch`` (from :meth:`begin_leave`) committed or was given up (a relaunch
        plans it again without the instance)."""
        if batch is None or self.subscription is None:
            return True
        with self.store.read() as conn:
            plan = subscription.read_plan(conn, self.subscription)
        return (
            plan is None
            or plan.committed
            or (plan.epoch, plan.spark_start, plan.spark_end) != batch
        )

    def finished(self) -> Ended | None:
        """The query stopped without being asked: failed (a Spark error) or stopped."""
        query = self.query
        if query is None or self._terminated is not query or self.parked:
            return None
        try:
            error = query.exception()
        except Exception:
            died = jvm_death(wait=JVM_EXIT_SECONDS)
            if died is None:
                raise  # the JVM lives: a passing Py4J failure, the supervisor asks again
            return Ended(StopMode.CANCEL, "the Spark session was lost", died, lost=True)
        if error is not None:
            return Ended(StopMode.CANCEL, "the query failed", str(error))
        return Ended(StopMode.CANCEL, "the query stopped")

    def close(
        self, instances: list[int], *, graceful: bool, epoch: int, timeout: float
    ) -> list[str]:
        """Tell every worker process to close the objects; wait for their acknowledgements."""
        command = "graceful_close" if graceful else "close"
        hint = [signals.control_hint(self.control_id)]
        unclosed: list[str] = []
        # Each close is acknowledged with a touch of the run's hint: no poll interval to wait out.
        with watch.woken_by(self.store.data_dir, hint) as acknowledged:
            objects.issue_command(self.store, self.control_id, command, instances, epoch)
            deadline = time.monotonic() + timeout
            while True:
                acknowledged.clear()
                opened = objects.open_objects(self.store, self.control_id, instances)
                left = [o for o in opened if o.alive]
                if not left:
                    break
                if time.monotonic() > deadline:
                    unclosed = [str(o) for o in left]
                    break
                acknowledged.wait(POLL_SECONDS)
        for gone in objects.open_objects(self.store, self.control_id, instances):
            if gone.alive is False:
                objects.mark_closed(
                    self.store, self.control_id, gone.id, "lost: its process ended", None
                )
        return unclosed

    def _active(self) -> bool:
        return self.query is not None and bool(self.query.isActive)
