"""A group's batch commit: one transaction, every member's part checked and committed.

The group query's ``foreachBatch`` runs on the driver. It collects the
tasks' :class:`~.task.SliceResult` rows and commits every member's part of
the batch in one store transaction through the one commit,
:func:`~.bulk.commit_members` (a member that left the group since the plan,
a fenced run, a pending death, a replay: each handled there, per member).

A member whose commit is refused or fails is discarded alone: its staged
files are deleted, its cursors stay where they were, and the next plan
reads the same input again. A slice that failed in a task discards the
member's whole part of the batch (committing only its other slices would
move the cursors past the failed slice's input), and its death, if its
task could not record it, is recorded here. Should the commit raise, it is
bisected down to the member that raised, which fails alone. No member's
outcome blocks or rolls back another's.
"""

from __future__ import annotations

import logging
import pickle
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import Connection
from sqlalchemy.exc import InterfaceError, InternalError, OperationalError

from sparkfn.api.errors import SparkfnError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.runtime.group.bulk import CommitOutcome, MemberPart, commit_members
from sparkfn.runtime.group.task import SliceResult
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.metrics_store import commit_stats_many
from sparkfn.runtime.query.staging import record_fenced
from sparkfn.runtime.spark.liveness import collect_all
from sparkfn.store.store import Store
from sparkfn.topics.log import StagedSegment
from sparkfn.topics.spark.commit import discard_staged, kill_if_requested

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_LOG = logging.getLogger("sparkfn.group")


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
        """Every member's part of the batch, in one store transaction.

        One transaction, not one per member: a batch of 200 members took the
        store's write lock 200 times, and a producer waited behind each. A
        member whose slice failed in its task commits nothing; the others go
        through :func:`~.bulk.commit_members` together (:meth:`_commit_parts`).
        The staged files of every member that did not commit are deleted; a
        fenced member's refusal and a failed member's death are recorded
        after the transaction. Should the transaction itself fail before its
        COMMIT, nothing of the batch is visible and every staged file goes.
        """
        store = Store.cached(self.store_url, self.data_dir)
        staged: dict[str, list[StagedSegment]] = {}
        for (cid, _), parts in by_member.items():
            staged.setdefault(cid, []).extend(
                seg for p in parts if p.batch for _, seg in p.batch.staged
            )
        every = [seg for segs in staged.values() for seg in segs]
        deaths: list[tuple[str, int, int, DeathCause]] = []
        reached_commit = False
        try:
            with store.write() as conn:
                pending: list[MemberPart] = []
                for (cid, epoch), parts in sorted(by_member.items()):
                    failed = self._failure(cid, epoch, parts, batch_id)
                    if failed is not None:
                        if failed[1] is not None:
                            deaths.append((cid, epoch, failed[0], failed[1]))
                        continue
                    batches = [p.batch for p in parts if p.batch is not None]
                    pending.append(
                        MemberPart(cid, epoch, parts[0].config, batches, parts[0].instance)
                    )
                outcome = self._commit_parts(store, conn, pending, batch_id)
                commit_stats_many(conn, outcome.committed)
                reached_commit = True
        except BaseException:
            if not reached_commit:
                discard_staged(store, every)
            raise
        done = outcome.committed_ids()
        discard_staged(
            store, [seg for cid, segs in staged.items() if cid not in done for seg in segs]
        )
        for part, refusal in outcome.fenced:
            _LOG.info(
                "group %s: member %s batch %d not committed: %s",
                self.group,
                part.control_id,
                batch_id,
                refusal,
            )
            record_fenced(store, part.control_id, refusal)
        for part, error in outcome.failed:
            _LOG.error(
                "group %s: member %s batch %d failed to commit: %s",
                self.group,
                part.control_id,
                batch_id,
                error,
            )
            cause = DeathCause.from_exception(error, "failure", threading.current_thread().name)
            deaths.append((part.control_id, part.epoch, part.instance, cause))
        for cid, epoch, instance, cause in deaths:
            control.record_death(store, cid, instance, cause, fatal=False, epoch=epoch)

    def _commit_parts(
        self, store: Store, conn: Connection, parts: list[MemberPart], batch_id: int
    ) -> CommitOutcome:
        """:func:`~.bulk.commit_members` of ``parts`` in a savepoint. Should it raise, the
        savepoint rolls back and each half is committed again on its own, down to the one
        member whose error it was: that member fails (its error recorded as its death: a
        sparkfn error, or the store refusing what it wrote, such as a state value that is
        not bytes) and no other member pays for it. The store's own trouble (locked,
        deadlocked, gone) fails the batch."""
        if not parts:
            return CommitOutcome()
        try:
            with conn.begin_nested():
                return commit_members(store, conn, parts, batch_id)
        except Exception as exc:
            if len(parts) == 1:
                if isinstance(exc, OperationalError | InterfaceError | InternalError):
                    raise  # the store's trouble (locked, deadlocked, gone), not the member's
                failure = exc if isinstance(exc, SparkfnError) else _refused(exc)
                return CommitOutcome(failed=[(parts[0], failure)])
            culprit = exc
        _LOG.warning(
            "group %s: batch %d of %d members committed in halves: %s",
            self.group,
            batch_id,
            len(parts),
            culprit,
        )
        half = len(parts) // 2
        first = self._commit_parts(store, conn, parts[:half], batch_id)
        return first.add(self._commit_parts(store, conn, parts[half:], batch_id))

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


def _refused(exc: Exception) -> SparkfnError:
    """The store's refusal of what one member's commit wrote, as that member's error."""
    cause = getattr(exc, "orig", None) or exc
    return SparkfnError(f"the store refused the batch's writes: {type(cause).__name__}: {cause}")
