"""A group's query in the worker, and the target through which a function runs in it.

:class:`QueryGroup` owns one streaming query (``format("sparkfn-group")``
→ ``foreachBatch`` :class:`~.commit.GroupCommitter`) for as long as the
worker runs; it is started when its first member joins and started again,
after a short backoff, if it fails as a whole (a Spark or store error that
no member's slice caught). A restart replays the batch in flight: each
member's plan in its subscription makes that replay commit once.

:class:`GroupMemberTarget` is a function's :class:`~sparkfn.runtime.lifecycle.query_target.QueryTarget`
with the query replaced by membership: ``launch`` joins the group in the
run's epoch, ``halt``/``cancel`` leave it, and the drain, suspend and close
protocol is the one a function's own query uses (the control record, the
end-of-stream markers, the workers' control threads). Leaving is one
store transaction, and a member's commit checks its membership in its own:
nothing planned before a member left commits after.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkfn.api.lifecycle import StopMode
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group import members, overrun, suspects
from sparkfn.runtime.group.commit import GroupCommitter
from sparkfn.runtime.group.start import start_group_query
from sparkfn.runtime.lifecycle import objects
from sparkfn.runtime.lifecycle.causes import short_error
from sparkfn.runtime.lifecycle.halving import describe_exit
from sparkfn.runtime.lifecycle.poison import EXIT_STATUS_WAIT_SECONDS
from sparkfn.runtime.lifecycle.query_target import JVM_EXIT_SECONDS, QueryTarget
from sparkfn.runtime.lifecycle.target import Ended
from sparkfn.runtime.spark.liveness import jvm_death
from sparkfn.store import signals, watch
from sparkfn.store.store import Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

_LOG = logging.getLogger("sparkfn.group")

RESTART_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0)
DEFAULT_GROUP = "default"


def groupable(config: FunctionConfig) -> bool:
    """Whether a function can share a group's query.

    Not when it asks for a query of its own (``dedicated``) or needs what
    only one gives: Spark settings of its own (``spark_conf``,
    ``resources``), its own trigger interval, the topic discovery of a
    ``topics_pattern``, or the clock's ticks and watermark pace of a window
    function (``window_config``).
    """
    return not (
        config.dedicated
        or config.session_conf
        or config.trigger_interval
        or config.topics_pattern
        or config.window_config
    )


class QueryGroup:
    """One group's streaming query on a worker's SparkSession."""

    def __init__(
        self,
        spark: SparkSession,
        store: Store,
        name: str,
        *,
        member_budget: int | None = None,
        member_seconds: float | None = None,
        trigger_interval: float = 0.0,
        spacing: float = 0.0,
        on_hot: Callable[[str, str, bool], None] | None = None,
        checkpoint: Path | None = None,
    ) -> None:
        self.spark = spark
        self.store = store
        self.name = name
        self.member_budget = member_budget
        self.member_seconds = member_seconds
        # The shortest time between two batches' starts (0: one right after the other).
        self.trigger_interval = trigger_interval
        # A shared group's least time between batches, by their width (extras.BatchSpacing).
        self.spacing = spacing
        # Told (control id, why, graceful) of a member that keeps exceeding its budgets;
        # graceful False: it already left (it held a batch). Returns at once.
        self.on_hot = on_hot
        self.checkpoint = checkpoint or store.data_dir / "groups" / name / "checkpoint"
        self.query: StreamingQuery | None = None
        self.error: str | None = None  # the last failure of its query
        self.restarts = 0
        self._lock = threading.Lock()
        self._closed = False
        self._interrupted = False  # the batch in flight was cancelled on purpose
        self._failed: frozenset[tuple[str, int]] = frozenset()  # the last failed batch's members
        self._watching: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether its query runs (or is being started again after a failure)."""
        return not self._closed and self.query is not None

    def ensure_running(self) -> None:
        """Start the group's query unless it runs."""
        with self._lock:
            if self._closed:
                msg = f"query group {self.name} is closed"
                raise RuntimeError(msg)
            if self.query is None:
                self.query = self._start()
            if self._watching is None and self.member_seconds is not None:
                self._watching = threading.Thread(
                    target=self._watch_overruns,
                    name=f"sparkfn-group-{self.name}-budget",
                    daemon=True,
                )
                self._watching.start()

    def _start(self) -> StreamingQuery:
        options = {}
        if self.member_budget:
            options["memberBudget"] = str(self.member_budget)
        if self.member_seconds:
            options["memberSeconds"] = str(self.member_seconds)
        if self.spacing:
            options["spacing"] = str(self.spacing)
        query = start_group_query(
            self.spark,
            self.store,
            self.name,
            GroupCommitter(
                self.store.url,
                str(self.store.data_dir),
                self.name,
                member_seconds=self.member_seconds,
                on_hot=self.on_hot,
            ),
            options=options,
            checkpoint=self.checkpoint,
            trigger_ms=round(self.trigger_interval * 1000),
            pool=f"group:{self.name}",
        )
        threading.Thread(
            target=self._await, args=(query,), name=f"sparkfn-group-{self.name}", daemon=True
        ).start()
        return query

    def batches(self) -> int:
        """Batches its current query has run (from Spark's progress reports)."""
        query = self.query
        progress = query.lastProgress if query is not None else None
        return int(progress["batchId"]) + 1 if progress else 0

    def _await(self, query: StreamingQuery) -> None:
        """Wait for the query to end; a failure starts it again after a backoff."""
        try:
            query.awaitTermination()
        except Exception as exc:  # noqa: BLE001 - failed: it is started again below
            self.error = str(exc)
        if self._closed:
            return
        try:
            error = query.exception()
        except Exception:
            died = jvm_death(wait=JVM_EXIT_SECONDS)
            if died is None:
                raise
            # The session is gone: its owner (a worker) closes the group and makes another.
            _LOG.info("query group %s: its query ended with the session: %s", self.name, died)
            return
        self.error = str(error) if error is not None else "the query stopped"
        delay = RESTART_BACKOFF_SECONDS[min(self.restarts, len(RESTART_BACKOFF_SECONDS) - 1)]
        if self._interrupted:  # cancelled to drop a member that overran: again at once
            self._interrupted = False
            delay = 0.0
            self.restarts -= 1
        elif self._suspects_taken_out(self.error):
            delay = 0.0  # the others have waited for the failed batch already
        _LOG.error(
            "query group %s: its query ended (%s); starting it again in %g s",
            self.name,
            self.error,
            delay,
        )
        # Until it starts: a store that does not answer (a restart) fails a start too.
        while True:
            time.sleep(delay)
            with self._lock:
                if self._closed or self.query is not query:
                    return
                self.restarts += 1
                try:
                    self.query = self._start()
                    return
                except Exception:
                    _LOG.exception("query group %s: its query did not start again", self.name)
            delay = RESTART_BACKOFF_SECONDS[min(self.restarts, len(RESTART_BACKOFF_SECONDS) - 1)]

    def _suspects_taken_out(self, error: str) -> bool:
        """:meth:`_take_out_suspects`, False when the store does not answer (the query starts
        again all the same: its thread must never end on a store outage)."""
        try:
            return self._take_out_suspects(error)
        except Exception:
            _LOG.exception("query group %s: its failed batch's members not read", self.name)
            return False

    def _take_out_suspects(self, error: str) -> bool:
        """After a failed batch: take out its members when a Python worker died under it,
        or when the same batch failed twice (see :mod:`.suspects`); True if any left."""
        found = suspects.failed_batch(self.store, self.name)
        key = frozenset((m.control_id, m.epoch) for m in found)
        again, self._failed = key == self._failed, key
        crashed = suspects.is_crash(error)
        data_dir = self.store.data_dir
        taking = bool(found) and crashed
        # Taken at each failure: a status never names the member of a later one.
        exits = suspects.take_exits(data_dir, self.name, EXIT_STATUS_WAIT_SECONDS if taking else 0)
        if not found or not (crashed or again):
            return False
        tasks = suspects.isolated_tasks(data_dir, self.name)  # the failed batch ran isolated
        index = suspects.failed_task(error)
        if tasks is not None and index is not None and index in tasks:
            chosen = [m for m in found if m.control_id == tasks[index]]
        elif tasks is None and len(found) > 1:
            # Run the batch again with each of them in a task of its own: the next
            # failure names the one at fault.
            suspects.request_isolation(data_dir, self.name, [m.control_id for m in found])
            _LOG.warning(
                "query group %s: a batch of %d members failed (%s); running it again isolated",
                self.name,
                len(found),
                short_error(error) if error else "no error",
            )
            return True
        else:
            chosen = suspects.to_take_out(found)
        left = [m for m in chosen if members.leave(self.store, m.control_id, epoch=m.epoch)]
        for member in left:
            cid = member.control_id
            status = exits.get(cid)
            if crashed and (status is not None or len(chosen) == 1):
                # As a function's own query says it (lifecycle.poison), with the exit status.
                kind = "sink" if cid.startswith("sink:") else "function"
                said = f"Python worker {describe_exit(status)} while processing a message of "
                why = f"a batch it was in failed: {said}{kind} {member.config.fqfn}"
            else:
                why = f"a batch it was in failed ({short_error(error) if error else 'no error'})"
            _LOG.warning("query group %s: member %s left: %s", self.name, cid, why)
            if self.on_hot is not None:
                self.on_hot(cid, why, False)
        return bool(left)

    def _watch_overruns(self) -> None:
        """Take out every member whose slice ran past its time budget, and cancel the
        batch it holds; Spark runs that batch again without it (see :mod:`.overrun`)."""
        data_dir = self.store.data_dir
        with watch.woken_by(data_dir, [overrun.overrun_hint(self.name)]) as touched:
            while not self._closed:
                touched.wait(1.0)
                touched.clear()
                try:
                    self._take_overruns()
                except Exception:
                    _LOG.exception(
                        "query group %s: a member past its budget was not taken out", self.name
                    )

    def _take_overruns(self) -> None:
        culprits = [
            (cid, budget)
            for cid, epoch, budget in overrun.take(self.store.data_dir, self.name)
            if members.leave(self.store, cid, epoch=epoch)
        ]
        if not culprits:
            return
        query = self.query
        if query is not None and query.isActive:
            self._interrupted = True
            self.spark.sparkContext.cancelJobGroup(str(query.runId))
        for cid, budget in culprits:
            why = f"its part of a batch ran past its {budget:g} s budget"
            _LOG.warning("query group %s: member %s left: %s", self.name, cid, why)
            if self.on_hot is not None:
                self.on_hot(cid, why, False)

    def close(self) -> None:
        """Stop the group's query (its members' runs are stopped first)."""
        with self._lock:
            self._closed = True
            query, self.query = self.query, None
        if query is not None and query.isActive:
            signals.touch(self.store.data_dir, members.group_hint(self.name))
            query.stop()


class GroupMemberTarget(QueryTarget):
    """A function's run as a member of a :class:`QueryGroup` instead of a query of its own."""

    def __init__(
        self,
        group: QueryGroup,
        config: FunctionConfig,
        store: Store,
        *,
        version: str = "1",
        **kwargs: Any,
    ) -> None:
        if kwargs.get("parking") is not None:
            msg = f"function {config.fqfn}: a group's member does not park"
            raise ValueError(msg)
        super().__init__(store, **kwargs)
        self.group = group
        self.config = config
        self.version = version  # the registered version it runs: its objects' key
        self._member = False

    def launch(self, epoch: int, instances: list[int]) -> None:
        """Join the group in ``epoch`` (the reader plans it from its next trigger)."""
        self._epoch = epoch
        members.join(
            self.store,
            self.group.name,
            self.control_id,
            self.config,
            epoch=epoch,
            version=self.version,
        )
        self._member = True
        self.group.ensure_running()

    def tend(self) -> bool:
        """A member is never parked: an idle member costs its group nothing."""
        return False

    def begin_stop(self, mode: StopMode, point: Any, cause: str) -> bool:
        """Ask the group's reader for the member's end-of-stream batch."""
        if not self._active():
            return False
        from sparkfn.runtime.lifecycle import control

        self.final_seq = control.request_stop(
            self.store, self.control_id, mode, point, epoch=self._epoch
        )
        return True

    def cancel(self, cause: str, epoch: int) -> None:
        """Interrupt the member's running tasks and leave the group."""
        objects.issue_command(
            self.store, self.control_id, "cancel", list(range(self.parallelism)), epoch
        )
        self._leave()

    def halt(self) -> None:
        """Leave the group: nothing more is planned for it, nothing planned commits."""
        self._leave()

    def _leave(self) -> None:
        if self._member:
            # In its own epoch only: the row of a newer run (on another worker) stays.
            members.leave(self.store, self.control_id, epoch=self._epoch)
            self._member = False

    def finished(self) -> Ended | None:
        """A member ends only when its supervisor says; the group restarts its own query."""
        return None

    def _active(self) -> bool:
        return self._member and self.group.running
