"""The one commit of every function's and sink's batch: all of a group's members at once.

Every run is a member of a group query (a function alone is a group of
one), so this is the only place a function's batch commits. The group's
``foreachBatch`` (:mod:`~.commit`) calls :func:`commit_members` with every
member's part of the batch, in its transaction; it makes each member's
checks and writes together, in about ten set-based statements whatever the
number of members (a member-by-member commit took about fifteen each, and
a batch of 200 members spent half of its time there):

* a member that left the group since the plan is **discarded**: its cursors
  stay, the next plan reads the same input;
* a member whose run was replaced (its run's epoch moved on) is **fenced**:
  :class:`~sparkfn.api.errors.StaleRunError`, which the caller records as a
  system exception of the function;
* a member with a death waiting for its supervisor (``context.fatal``, a
  failure) is **discarded**: no batch commits after a death;
* a member whose subscription is past the batch's input (a replay after a
  crash, under any checkpoint) is **discarded**, so outputs and state land
  exactly once; one whose subscription is gone (deleted since the plan) too;
* a member whose subscription another run owns, or one of whose output
  topics is gone, **fails**: the caller records the error as its death;
* every other member **commits**: its subscription's cursors move past the
  batch's input, the segments it staged become visible in every topic
  (outputs, publishes, dead letters, logs), its state mutations apply, its
  end-of-stream batch (drain, suspend) records itself, and its stats are
  returned for the caller to write with every member's.

Two parts of one batch that name the same run or the same subscription
(an older and a newer epoch of a run, two runs sharing a subscription)
commit one after the other, in that order, as separate rounds of the same
statements: the later sees what the earlier did.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from sqlalchemy import Connection

from sparkfn.api.errors import SparkfnError, StaleRunError, TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.group.members import members_in
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.staging import FunctionBatch
from sparkfn.runtime.stats import InstanceStats
from sparkfn.state.store import apply_mutations, merge_mutations
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import StagedSegment, commit_segments_many

_LOG = logging.getLogger("sparkfn.group")


@dataclass(frozen=True)
class MemberPart:
    """One member's part of a batch, as its tasks staged it."""

    control_id: str
    epoch: int
    config: FunctionConfig
    batches: list[FunctionBatch]
    instance: int = 0  # an instance it ran, to charge a failed commit to


@dataclass
class CommitOutcome:
    """What :func:`commit_members` did with each member (see the module docstring)."""

    committed: list[tuple[str, list[tuple[int, InstanceStats]]]] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)
    fenced: list[tuple[MemberPart, StaleRunError]] = field(default_factory=list)
    failed: list[tuple[MemberPart, SparkfnError]] = field(default_factory=list)

    def add(self, other: CommitOutcome) -> CommitOutcome:
        """This outcome with ``other``'s appended (the halves of a bisected commit)."""
        self.committed += other.committed
        self.discarded += other.discarded
        self.fenced += other.fenced
        self.failed += other.failed
        return self

    def committed_ids(self) -> set[str]:
        """The control ids of the members that committed."""
        return {cid for cid, _ in self.committed}


def commit_members(
    store: Store, conn: Connection, parts: list[MemberPart], batch_id: int
) -> CommitOutcome:
    """Commit every member of ``parts`` that may commit, in ``conn``'s transaction (see the
    module docstring); ``batch_id`` only names the batch in messages."""
    outcome = CommitOutcome()
    for round_ in _rounds(parts):
        _commit_round(store, conn, round_, batch_id, outcome)
    return outcome


def _rounds(parts: list[MemberPart]) -> list[list[MemberPart]]:
    """``parts`` in rounds in which no run and no subscription appears twice, in order."""
    rounds: list[list[MemberPart]] = []
    keys: list[set[str]] = []  # each round's runs and subscriptions
    for part in parts:
        mine = {f"run:{part.control_id}", f"sub:{part.config.subscription}"}
        at = next((i for i, taken in enumerate(keys) if not taken & mine), len(rounds))
        if at == len(rounds):
            rounds.append([])
            keys.append(set())
        rounds[at].append(part)
        keys[at] |= mine
    return rounds


def _commit_round(
    store: Store, conn: Connection, parts: list[MemberPart], batch_id: int, outcome: CommitOutcome
) -> None:
    ids = [p.control_id for p in parts]
    members = members_in(conn, ids, lock=True)
    epochs = control.epochs_of(conn, ids, lock=True)  # a new run's epoch bump waits for us
    records = control.read_controls(conn, ids)
    candidates: list[MemberPart] = []
    for part in parts:
        cid, fqfn = part.control_id, part.config.fqfn
        record = records.get(cid)
        current = epochs.get(cid, part.epoch)
        if members.get(cid) != part.epoch:
            outcome.discarded.append(cid)  # it left since the plan: its cursors unmoved
        elif current != part.epoch:
            msg = (
                f"function {fqfn}: batch {batch_id} of run epoch {part.epoch} refused: "
                f"a newer run (epoch {current}) owns the function"
            )
            outcome.fenced.append((part, StaleRunError(msg)))
        elif record is not None and (
            dead := [
                (i, r) for i, r in sorted(record.instances.items()) if r.dead and not r.handled
            ]
        ):
            instance, inst = dead[0]
            _LOG.info(
                "function %s instance %d died (%s); batch %d not committed",
                fqfn,
                instance,
                inst.death,
                batch_id,
            )
            outcome.discarded.append(cid)
        else:
            candidates.append(part)
    infos = TopicAdmin(store).get_many(
        {t for p in candidates for b in p.batches for t, _ in b.staged}, conn
    )
    ready: list[MemberPart] = []
    for part in candidates:
        missing = sorted({t for b in part.batches for t, _ in b.staged if _info(infos, t) is None})
        if missing:
            msg = f"topic {TopicName.parse(missing[0])} does not exist"
            outcome.failed.append((part, TopicNotFoundError(msg)))
        else:
            ready.append(part)
    answers = subscription.commit_plans(
        conn, {p.config.subscription: (p.epoch, p.control_id) for p in ready}
    )
    accepted: list[MemberPart] = []
    for part in ready:
        answer = answers[part.config.subscription]
        if isinstance(answer, subscription.Plan):
            accepted.append(part)
        elif answer is None:
            outcome.discarded.append(part.control_id)  # a replay, or the subscription is gone
        else:
            outcome.failed.append((part, answer))  # another run owns the subscription
    by_topic: dict[int, tuple[TopicInfo, list[StagedSegment]]] = {}
    for part in accepted:
        for batch in part.batches:
            for topic, seg in batch.staged:
                info = _info(infos, topic)
                assert info is not None  # checked above
                by_topic.setdefault(info.id, (info, []))[1].append(seg)
    commit_segments_many(store, conn, list(by_topic.values()), uuid.uuid4().hex)
    for part in accepted:
        summaries = [s for b in part.batches for s in b.summaries]
        apply_mutations(conn, part.config.fqfn, merge_mutations(s.mutations for s in summaries))
        if records.get(part.control_id) is not None and any(s.final for s in summaries):
            control.record_final_commit(conn, part.control_id)
        outcome.committed.append((part.control_id, [(s.instance_id, s.stats) for s in summaries]))


def _info(infos: dict[TopicName, TopicInfo], topic: str) -> TopicInfo | None:
    return infos.get(TopicName.parse(topic))
