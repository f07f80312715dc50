"""Subscriptions: a named cursor per topic partition, the position of record.

As in Pulsar, a subscription outlives any one consumer: a function's
position in its inputs is its subscription (named ``tenant/ns/name`` unless
``subscription_name`` says otherwise), kept in the store, never in Spark's
checkpoint. A cursor is the next offset to deliver.

A streaming query reads a subscription in two steps, both on the driver:

1. **plan** (:func:`plan_batch`, when the source splits a micro-batch into
   tasks): the batch reads ``[cursor, end)`` of each partition, whatever
   offsets Spark's checkpoint holds, so a new or lost checkpoint resumes
   exactly where the last commit left off. The plan is recorded with the
   run's epoch; planning the same Spark batch again in the same run gives
   the same plan. ``ack_on_plan`` (at-most-once) moves the cursors past the
   batch right away, so a batch that fails is never read again.
2. **commit** (:func:`commit_plan`, inside the sink's transaction): the
   cursors move from the plan's starts to its ends only if they are still
   at the starts; otherwise the batch was committed already (a replay after
   a crash, or another run got there first) and the caller discards it.
   Because the sink's outputs, state and the cursor move share one
   transaction, every input's effects land exactly once.

A subscription has **one owner**, because its plan is one row: two queries
planning it in turn would each overwrite the other's plan, and a commit
would move the cursors by a plan that is not its batch's (messages lost
without a trace). The owner is the run's control id (a function's FQFN, a
sink's ``sink:<fqfn>``: the reader's ``controlId`` option); every plain
reader (no ``controlId``) of a subscription shares the owner
:func:`reader_owner`. The first plan claims the subscription in its own
transaction (:func:`claim`); a plan by another owner is refused with
:class:`~sparkfn.api.errors.SubscriptionInUseError` before anything
moves, and so is a commit that names another owner. Epochs then fence the
runs of the one owner as before. :func:`delete_subscription` and
:func:`release` free the subscription for another owner; :func:`unsubscribe`
(Pulsar's) removes it from one topic.

The package is the subscription API the rest of sparkfn calls
(``subscription.plan_batch(...)``); its rooms are
:mod:`~sparkfn.topics.subscription.positions` (the cursors),
:mod:`~sparkfn.topics.subscription.owners` (the one owner) and
:mod:`~sparkfn.topics.subscription.plans` (planning and committing batches).

>>> with store.write() as conn:
...     ensure(conn, "public/default/wc", [topic], "earliest")
{(3, 0): 0}
"""

from sparkfn.topics.subscription.owners import (
    READER_OWNER_PREFIX,
    check_free,
    claim,
    describe_owner,
    in_use_error,
    owner_of,
    reader_owner,
    release,
)
from sparkfn.topics.subscription.plans import (
    Plan,
    Span,
    commit_plan,
    commit_plans,
    plan_batch,
    read_plan,
)
from sparkfn.topics.subscription.positions import (
    LiveRun,
    PartitionKey,
    Position,
    adopt,
    cursors,
    cursors_of,
    delete_subscription,
    ensure,
    skip,
    unsubscribe,
)

__all__ = [
    "LiveRun",
    "PartitionKey",
    "Plan",
    "Position",
    "READER_OWNER_PREFIX",
    "Span",
    "adopt",
    "check_free",
    "claim",
    "commit_plan",
    "commit_plans",
    "cursors",
    "cursors_of",
    "delete_subscription",
    "describe_owner",
    "ensure",
    "in_use_error",
    "owner_of",
    "plan_batch",
    "read_plan",
    "reader_owner",
    "release",
    "skip",
    "unsubscribe",
]
