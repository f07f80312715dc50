"""Who owns a subscription: the one run (or every plain reader) whose plans may move its cursors.

A subscription's plan is one row, so two queries planning it in turn would
overwrite each other's plan and a commit would move the cursors by a plan
that is not its batch's. The first plan claims the subscription
(:func:`claim`, in the plan's transaction); a plan or commit by another owner
is refused with :class:`~sparkfn.api.errors.SubscriptionInUseError` naming both.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from sparkfn.api.errors import SubscriptionInUseError
from sparkfn.store import schema
from sparkfn.store.clock import utc_now

_owners = schema.subscription_owners

# The owner of a subscription read by a query with no controlId: reader:<name>.
READER_OWNER_PREFIX = "reader:"


def reader_owner(name: str) -> str:
    """The owner of subscription ``name`` when a plain reader (no ``controlId``) plans it.

    One owner for every plain reader of the subscription, so they share it as
    they always could: no sparkfn sink commits a plain reader's plan (its
    cursors move only at planning, with ``ackOnPlan``, and each such move is
    one serialized transaction), so their overwriting each other's plan
    loses nothing. A function or a sink is refused it, and it them: a commit
    of theirs would move the cursors by the plain reader's plan.
    """
    return f"{READER_OWNER_PREFIX}{name}"


def describe_owner(owner: str) -> str:
    """``owner`` as a message says it: ``function t/ns/f``, ``sink t/ns/s``, ``a plain reader``."""
    if owner.startswith(READER_OWNER_PREFIX):
        return "a plain sparkfn reader (no controlId)"
    kind, colon, fqfn = owner.partition(":")
    return f"{kind} {fqfn}" if colon else f"function {owner}"


def in_use_error(name: str, holder: str, refused: str) -> SubscriptionInUseError:
    """The refusal of ``refused`` (an owner) on subscription ``name``, which ``holder`` owns."""
    option = (
        "'subscription' option" if refused.startswith(READER_OWNER_PREFIX) else "subscription_name"
    )
    msg = (
        f"subscription {name}: read by {describe_owner(holder)}; {describe_owner(refused)} "
        f"cannot share it (give it another {option})"
    )
    return SubscriptionInUseError(msg)


def owner_of(conn: Connection, name: str, *, lock: bool = False) -> str | None:
    """Who owns subscription ``name`` (a run's control id, or :func:`reader_owner`); None: nobody yet."""
    query = select(_owners.c.owner).where(_owners.c.name == name)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return conn.execute(query).scalar()


def check_free(conn: Connection, name: str, owner: str) -> None:
    """:class:`SubscriptionInUseError` naming both if an owner other than ``owner`` has ``name``.

    A check before a run starts; :func:`claim`, in the plan's transaction, is the guard.
    """
    holder = owner_of(conn, name)
    if holder is not None and holder != owner:
        raise in_use_error(name, holder, owner)


def claim(conn: Connection, name: str, owner: str) -> None:
    """Make ``owner`` the owner of subscription ``name``, unless another owner has it.

    Raises :class:`SubscriptionInUseError` naming both if another has it.
    Called in the transaction of a plan, so the first plan and its claim
    commit together; of two first claims at once, one waits for the other
    (on PostgreSQL the insert waits on the key; SQLite has one writer) and
    then sees it.
    """
    holder = owner_of(conn, name, lock=True)
    if holder is None:
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        conn.execute(
            dialect.insert(_owners)
            .values(name=name, owner=owner, claimed_at=utc_now())
            .on_conflict_do_nothing(index_elements=[_owners.c.name])
        )
        holder = owner_of(conn, name, lock=True)
    if holder is not None and holder != owner:
        raise in_use_error(name, holder, owner)


def release(conn: Connection, name: str, owner: str | None = None) -> bool:
    """Free subscription ``name`` for another owner (only from ``owner``, if given); True if it had one.

    The cursors stay: whoever plans it next claims it and resumes from them.
    """
    condition = _owners.c.name == name
    if owner is not None:
        condition = and_(condition, _owners.c.owner == owner)
    return bool(conn.execute(delete(_owners).where(condition)).rowcount)
