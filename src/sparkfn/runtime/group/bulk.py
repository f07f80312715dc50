"""A group's batch commit for all its members at once, in set-based statements.

The member-by-member commit (:class:`~.commit.MemberBatchWriter`) takes
about fifteen statements per member: its membership, its epoch, its control
record, its subscription's owner, cursors and plan, each output topic's
lookup, lock, offsets and segment rows, and a savepoint. A batch of 200
members spent half of its time there. :func:`commit_members` makes the same
checks and writes for every member together, in about ten statements
whatever their number, and in the same transaction:

* it discards, as the member's own commit would, a member that left the
  group since the plan, and one whose subscription is past the batch's input
  (a replay);
* it leaves to the member-by-member commit (``leftover``) every member whose
  own commit would be refused or fail: a newer run owns it, a death waits for
  its supervisor, another run owns its subscription, an output topic is gone,
  or two members share a subscription. Those are rare; there each refusal is
  recorded exactly as a query of its own would.

The caller runs it in a savepoint: should a statement fail, the savepoint
rolls back and every member goes the member-by-member way.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy import Connection

from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.group.members import members_in
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.commit import FunctionBatch
from sparkfn.runtime.stats import InstanceStats
from sparkfn.state.store import apply_mutations, merge_mutations
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import StagedSegment, commit_segments_many


@dataclass(frozen=True)
class MemberPart:
    """One member's part of a batch, as its tasks staged it."""

    control_id: str
    epoch: int
    config: FunctionConfig
    batches: list[FunctionBatch]


@dataclass
class BulkOutcome:
    """What :func:`commit_members` did with each member."""

    committed: list[tuple[str, list[tuple[int, InstanceStats]]]] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)  # left the group, or a replay
    leftover: list[str] = field(default_factory=list)  # for the member-by-member commit


def commit_members(
    store: Store, conn: Connection, parts: list[MemberPart], batch_id: int
) -> BulkOutcome:
    """Commit every member of ``parts`` that its own commit would commit, in ``conn``'s
    transaction (see the module docstring); ``batch_id`` only names the batch."""
    outcome = BulkOutcome()
    ids = [p.control_id for p in parts]
    members = members_in(conn, ids, lock=True)
    epochs = control.epochs_of(conn, ids, lock=True)
    records = control.read_controls(conn, ids)
    candidates: list[MemberPart] = []
    seen_subscriptions: dict[str, int] = {}
    for part in parts:
        cid = part.control_id
        seen_subscriptions[part.config.subscription] = (
            seen_subscriptions.get(part.config.subscription, 0) + 1
        )
        record = records.get(cid)
        if members.get(cid) != part.epoch:
            outcome.discarded.append(cid)  # it left since the plan: its cursors unmoved
        elif epochs.get(cid, part.epoch) != part.epoch:
            outcome.leftover.append(cid)  # fenced: refused and recorded one by one
        elif record is not None and any(
            i.dead and not i.handled for i in record.instances.values()
        ):
            outcome.leftover.append(cid)  # a death waits for its supervisor
        else:
            candidates.append(part)
    admin = TopicAdmin(store)
    wanted_topics = {t for p in candidates for b in p.batches for t, _ in b.staged}
    infos = admin.get_many(wanted_topics, conn)
    ready: list[MemberPart] = []
    for part in candidates:
        topics = {t for b in part.batches for t, _ in b.staged}
        if seen_subscriptions[part.config.subscription] > 1 or any(
            _info(infos, t) is None for t in topics
        ):
            outcome.leftover.append(part.control_id)
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
            outcome.discarded.append(part.control_id)  # a replay
        else:
            outcome.leftover.append(part.control_id)  # another run owns the subscription
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
    return outcome


def _info(infos: dict[TopicName, TopicInfo], topic: str) -> TopicInfo | None:
    return infos.get(TopicName.parse(topic))
