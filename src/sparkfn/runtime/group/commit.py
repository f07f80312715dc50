"""A group's batch commit: one transaction per member, each with the member's own checks.

The group query's ``foreachBatch`` runs on the driver. It collects the
tasks' :class:`~.task.SliceResult` rows and commits, in one store
transaction with a savepoint per member, each member's part of the batch
as that function's own query would
(:meth:`~sparkfn.runtime.query.commit.FunctionBatchWriter.commit`: its epoch, a
pending death, its subscription's move, its outputs, state and stats in one
transaction), plus one more check in that transaction: the member is still
in the group in the batch's epoch, so a member that left (cancelled,
stopped, dead and not yet back) commits nothing planned before it left.

A member whose commit is refused (a newer run, a pending death, it left)
or fails is discarded alone: its staged files are deleted, its cursors stay
where they were, and the next plan reads the same input again. A slice that
failed in a task discards the member's whole part of the batch (committing
only its other slices would move the cursors past the failed slice's
input), and its death, if its task could not record it, is recorded here.
No member's outcome blocks or rolls back another's.
"""

from __future__ import annotations

import logging
import pickle
import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from sparkfn.api.errors import FatalError, SparkfnError, StaleRunError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.runtime.group.bulk import MemberPart, commit_members
from sparkfn.runtime.group.members import is_member
from sparkfn.runtime.group.task import SliceResult
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.metrics_store import commit_stats_many
from sparkfn.runtime.query.commit import FunctionBatch, FunctionBatchWriter
from sparkfn.runtime.spark.liveness import collect_all
from sparkfn.runtime.stats import InstanceStats
from sparkfn.store.store import Store
from sparkfn.topics.log import StagedSegment
from sparkfn.topics.spark.commit import discard_staged, kill_if_requested

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_LOG = logging.getLogger("sparkfn.group")


class MemberBatchWriter(FunctionBatchWriter):
    """A member's commit: the function's, refused once the member left the group."""

    stats: list[tuple[int, InstanceStats]]

    def commit_in(
        self, store: Store, conn: Connection, batches: list[FunctionBatch], batch_id: int
    ) -> bool:
        """The member's commit in the caller's transaction, its stats left in :attr:`stats`
        for the caller to write with every member's; False: discarded (a replay, or it left)."""
        self.stats = []
        return self._commit(store, conn, batches, batch_id)

    def _add_stats(self, conn: Connection, per_instance: list[tuple[int, InstanceStats]]) -> None:
        self.stats = per_instance

    def record_fenced(self, store: Store, exc: StaleRunError) -> None:
        """A refused commit of an older run: a system exception in the member's status."""
        self._record_fenced(store, exc)

    def _commit(
        self, store: Store, conn: Connection, batches: list[FunctionBatch], batch_id: int
    ) -> bool:
        if not is_member(conn, self.control_id, self.epoch, lock=True):
            return False  # it left since the plan: discarded, its cursors unmoved
        return super()._commit(store, conn, batches, batch_id)


# Batches in a row a member may fill its row budget in, or run past its time
# budget once, before it is said to be hot (its group moves it to a query of its own).
HOT_BATCHES = 3


class GroupCommitter:
    """The ``foreachBatch`` of a group's query.

    ``on_hot(control_id, why, True)`` is told of a member that filled its row
    budget in :data:`HOT_BATCHES` batches in a row, or whose slices ran longer
    than ``member_seconds`` in one batch; it must return at once.
    """

    def __init__(
        self,
        store_url: str,
        data_dir: str,
        group: str,
        *,
        member_seconds: float | None = None,
        on_hot: Callable[[str, str, bool], None] | None = None,
    ) -> None:
        self.store_url = store_url
        self.data_dir = data_dir
        self.group = group
        self.member_seconds = member_seconds
        self.on_hot = on_hot
        self._full: dict[str, int] = {}  # batches in a row each member filled its budget

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        """Commit each member's part of batch ``batch_id``: one transaction, a savepoint each."""
        results: list[SliceResult] = [
            r for row in collect_all(frame) for r in pickle.loads(row.payload)
        ]
        by_member: dict[tuple[str, int], list[SliceResult]] = {}
        for result in results:
            by_member.setdefault((result.control_id, result.epoch), []).append(result)
        self.commit(by_member, batch_id)
        kill_if_requested(batch_id)  # crash tests only: see commit.KILL_AFTER_COMMIT_ENV
        self._watch_budgets(by_member)

    def _watch_budgets(self, by_member: dict[tuple[str, int], list[SliceResult]]) -> None:
        full = {cid for (cid, _), parts in by_member.items() if any(p.capped for p in parts)}
        self._full = {cid: self._full.get(cid, 0) + 1 for cid in full}
        for (cid, _), parts in by_member.items():
            seconds = sum(p.seconds for p in parts)
            why = None
            if self._full.get(cid, 0) >= HOT_BATCHES:
                why = f"it filled its row budget in {HOT_BATCHES} batches in a row"
            elif self.member_seconds is not None and seconds > self.member_seconds:
                why = f"its part of a batch ran {seconds:.1f} s, past its {self.member_seconds:g} s budget"
            if why is not None and self.on_hot is not None:
                self._full.pop(cid, None)
                self.on_hot(cid, why, True)

    def commit(self, by_member: dict[tuple[str, int], list[SliceResult]], batch_id: int) -> None:
        """Every member's part of the batch, in one store transaction with a savepoint per member.

        One transaction, not one per member: a batch of 200 members took the
        store's write lock 200 times, and a producer waited behind each. The
        members go through :func:`~.bulk.commit_members` together first; those
        it leaves (a refusal or failure of their own) commit one by one.
        A member refused or failing rolls back to its savepoint alone: its
        staged files are deleted, its cursors stay, its death is recorded
        after the transaction. Should the transaction itself fail before its
        COMMIT, nothing of the batch is visible and every staged file goes.
        """
        store = Store.cached(self.store_url, self.data_dir)
        every = [
            seg
            for parts in by_member.values()
            for p in parts
            if p.batch
            for _, seg in p.batch.staged
        ]
        unseen: list[StagedSegment] = []  # staged files no committed row names
        deaths: list[tuple[str, int, int, DeathCause]] = []
        fenced: list[tuple[MemberBatchWriter, StaleRunError]] = []
        stats: list[tuple[str, list[tuple[int, InstanceStats]]]] = []
        reached_commit = False
        try:
            with store.write() as conn:
                pending: list[tuple[str, int, list[SliceResult], list[StagedSegment]]] = []
                for (cid, epoch), parts in sorted(by_member.items()):
                    staged = [seg for p in parts if p.batch for _, seg in p.batch.staged]
                    failed = self._failure(cid, epoch, parts, batch_id)
                    if failed is not None:
                        unseen += staged
                        if failed[1] is not None:
                            deaths.append((cid, epoch, failed[0], failed[1]))
                        continue
                    pending.append((cid, epoch, parts, staged))
                leftover, discarded = self._bulk(store, conn, pending, batch_id, stats)
                unseen += discarded
                for cid, epoch, parts, staged in leftover:
                    writer = MemberBatchWriter(
                        parts[0].config, self.store_url, self.data_dir, epoch=epoch, control_id=cid
                    )
                    batches = [p.batch for p in parts if p.batch is not None]
                    try:
                        with conn.begin_nested():
                            if not writer.commit_in(store, conn, batches, batch_id):
                                unseen += staged  # a replay, or it left: discarded
                        stats.append((cid, writer.stats))
                    except (StaleRunError, FatalError) as exc:
                        # A newer run, or a death waiting for its supervisor: this member only.
                        unseen += staged
                        _LOG.info(
                            "group %s: member %s batch %d not committed: %s",
                            self.group,
                            cid,
                            batch_id,
                            exc,
                        )
                        if isinstance(exc, StaleRunError):
                            fenced.append((writer, exc))
                    except SparkfnError as exc:
                        unseen += staged
                        _LOG.error(
                            "group %s: member %s batch %d failed to commit: %s",
                            self.group,
                            cid,
                            batch_id,
                            exc,
                        )
                        cause = DeathCause.from_exception(
                            exc, "failure", threading.current_thread().name
                        )
                        deaths.append((cid, epoch, parts[0].instance, cause))
                commit_stats_many(conn, stats)  # of the members committed above
                reached_commit = True
        except BaseException:
            if not reached_commit:
                discard_staged(store, every)
            raise
        discard_staged(store, unseen)
        for writer, refusal in fenced:
            writer.record_fenced(store, refusal)
        for cid, epoch, instance, cause in deaths:
            control.record_death(store, cid, instance, cause, fatal=False, epoch=epoch)

    def _bulk(
        self,
        store: Store,
        conn: Connection,
        pending: list[tuple[str, int, list[SliceResult], list[StagedSegment]]],
        batch_id: int,
        stats: list[tuple[str, list[tuple[int, InstanceStats]]]],
    ) -> tuple[list[tuple[str, int, list[SliceResult], list[StagedSegment]]], list[StagedSegment]]:
        """Commit what :func:`~.bulk.commit_members` can, in a savepoint; returns the members
        left for the member-by-member commit (all of them, should the savepoint fail), and
        the staged files of the members it discarded.
        """
        counts = Counter(cid for cid, *_ in pending)
        bulk = [m for m in pending if counts[m[0]] == 1]
        if len(bulk) < 2:
            return pending, []
        parts = [
            MemberPart(cid, epoch, slices[0].config, [p.batch for p in slices if p.batch])
            for cid, epoch, slices, _ in bulk
        ]
        try:
            with conn.begin_nested():
                outcome = commit_members(store, conn, parts, batch_id)
        except Exception as exc:  # one by one, so that only the culprit fails
            _LOG.warning(
                "group %s: batch %d committed member by member: %s", self.group, batch_id, exc
            )
            return pending, []
        stats += outcome.committed
        discarded, leftover = set(outcome.discarded), set(outcome.leftover)
        files = [seg for cid, _, _, staged in bulk if cid in discarded for seg in staged]
        return [m for m in pending if counts[m[0]] > 1 or m[0] in leftover], files

    def _failure(
        self, cid: str, epoch: int, parts: list[SliceResult], batch_id: int
    ) -> tuple[int, DeathCause | None] | None:
        """A slice of the member failed in its task: ``(instance, the death to record)``
        (None when its task recorded it: a fatal, a cancel); None if none failed."""
        failed = [p for p in parts if p.error is not None]
        if not failed:
            return None
        charged = [p for p in failed if p.charge]
        if not charged:
            return (failed[0].instance, None)
        first = charged[0]
        _LOG.warning(
            "group %s: member %s failed in batch %d: %s", self.group, cid, batch_id, first.error
        )
        cause = DeathCause(
            "TaskFailed", first.error or "", "", "group task", threading.current_thread().name
        )
        return (first.instance, cause)
