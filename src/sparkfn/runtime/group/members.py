"""Who is in a query group: the ``group_members`` table.

A member is one run (a function's control id) in one epoch. Its supervisor
writes the row when the run launches and removes it when the run halts; the
group's reader plans only the members listed, and a member's commit checks,
in its own transaction, that its row is still there in the same epoch.
Every change touches the group's hint so an idle reader looks at once.

The row's ``spec`` is the run's config with its secrets sealed
(:mod:`sparkfn.store.sealed`); :func:`members` opens them, so a
:class:`Member` holds the config the run needs, in memory only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, and_, delete, insert, select, update

from sparkfn.config.function import FunctionConfig
from sparkfn.store import schema, signals
from sparkfn.store.clock import utc_now
from sparkfn.store.sealed import Sealer, open_config, seal_config
from sparkfn.store.store import Store

_members = schema.group_members


def group_hint(group: str) -> str:
    """The hint touched when a group's membership changes."""
    return "group-" + group.replace("/", "_").replace(":", "_")


@dataclass(frozen=True)
class Member:
    """One member run of a group, as its reader and tasks see it."""

    control_id: str
    group: str
    epoch: int
    version: str
    spec: str  # the FunctionConfig as JSON, its secrets opened

    @property
    def config(self) -> FunctionConfig:
        """The member's function config (parsed once per process and spec)."""
        return parsed_config(self.spec)


@functools.lru_cache(maxsize=4096)
def parsed_config(spec: str) -> FunctionConfig:
    """The FunctionConfig of a member's ``spec``, parsed once per process and spec."""
    # A group's reader reads every member at every look: with a thousand idle
    # members, parsing their configs each time was most of its idle CPU.
    return FunctionConfig.model_validate_json(spec)


def join(
    store: Store, group: str, control_id: str, config: FunctionConfig, *, epoch: int, version: str
) -> None:
    """Make run ``control_id`` a member of ``group`` in ``epoch`` (replacing an earlier row)."""
    values = {
        "group_name": group,
        "epoch": epoch,
        "version": version,
        "spec": json.dumps(seal_config(config.model_dump(mode="json"), store.sealer)),
        "joined_at": utc_now(),
    }
    with store.write() as conn:
        signals.hint_on_commit(conn, group_hint(group))
        found = conn.execute(
            select(_members.c.group_name).where(_members.c.control_id == control_id)
        ).first()
        if found is None:
            conn.execute(insert(_members).values(control_id=control_id, **values))
        else:
            if found.group_name != group:
                signals.hint_on_commit(conn, group_hint(found.group_name))
            conn.execute(
                update(_members).where(_members.c.control_id == control_id).values(**values)
            )


def leave(store: Store, control_id: str, *, epoch: int | None = None) -> bool:
    """Remove run ``control_id`` from its group (only in ``epoch``, if given); True if it was a member."""
    with store.write() as conn:
        found = conn.execute(
            select(_members.c.group_name, _members.c.epoch).where(
                _members.c.control_id == control_id
            )
        ).first()
        if found is None or (epoch is not None and found.epoch != epoch):
            return False
        signals.hint_on_commit(conn, group_hint(found.group_name))
        conn.execute(delete(_members).where(_members.c.control_id == control_id))
        return True


def members(conn: Connection, group: str, sealer: Sealer) -> list[Member]:
    """The members of ``group``, in control id order (their secrets opened with ``sealer``,
    the store's)."""
    rows = conn.execute(
        select(_members).where(_members.c.group_name == group).order_by(_members.c.control_id)
    ).all()
    return [
        Member(
            r.control_id, r.group_name, r.epoch, r.version, _opened(r.spec, sealer, r.control_id)
        )
        for r in rows
    ]


@functools.lru_cache(maxsize=4096)
def _opened(spec: str, sealer: Sealer, control_id: str) -> str:
    # Cached as parsed_config is: a reader reads every member at every look.
    return json.dumps(open_config(json.loads(spec), sealer, f"function {control_id}"))


def is_member(conn: Connection, control_id: str, epoch: int, *, lock: bool = False) -> bool:
    """Whether ``control_id`` is a member in ``epoch`` (``lock``: for update, on PostgreSQL)."""
    query = select(_members.c.epoch).where(
        and_(_members.c.control_id == control_id, _members.c.epoch == epoch)
    )
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return conn.execute(query).first() is not None


def members_in(
    conn: Connection, control_ids: Iterable[str], *, lock: bool = False
) -> dict[str, int]:
    """``{control id: epoch}`` of those of ``control_ids`` that are members (``lock``: for
    update, on PostgreSQL, in control id order)."""
    wanted = sorted(set(control_ids))
    if not wanted:
        return {}
    query = select(_members.c.control_id, _members.c.epoch).where(_members.c.control_id.in_(wanted))
    if lock and conn.dialect.name == "postgresql":
        query = query.order_by(_members.c.control_id).with_for_update()
    return {r.control_id: r.epoch for r in conn.execute(query)}
