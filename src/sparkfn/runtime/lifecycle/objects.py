"""Commands to Spark's Python workers, and the user objects they create and close.

The supervisor issues a command (close, graceful close, cancel) for some
instances of a run (named by its control id, :func:`sparkfn.runtime.lifecycle.control.control_id`,
kept in the tables' ``fqfn`` column); the control thread in each Python worker process
(:mod:`sparkfn.runtime.lifecycle.workerctl`) reads the commands newer than the last it
saw, acts on its objects, and marks them closed here, so the supervisor
knows every object was closed or names those that were not.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import and_, func, insert, select, update

from sparkfn.store import schema, signals
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store

commands = schema.function_commands
objects = schema.function_objects


def issue_command(
    store: Store, control_id: str, command: str, instance_ids: Iterable[int], epoch: int
) -> int:
    """Ask every worker process to act on the objects of ``instance_ids``; returns the command id."""
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.COMMANDS_HINT)
        result = conn.execute(
            insert(commands).values(
                fqfn=control_id,
                instances=json.dumps(sorted(instance_ids)),
                command=command,
                epoch=epoch,
                issued_at=utc_now(),
            )
        )
        return int(result.inserted_primary_key[0])


@dataclass(frozen=True)
class Command:
    """A command as a worker process reads it."""

    id: int
    control_id: str  # the run's
    instances: list[int]
    command: str
    epoch: int


def commands_after(store: Store, last_id: int) -> list[Command]:
    """Commands newer than ``last_id``."""
    with store.read() as conn:
        rows = conn.execute(
            select(commands).where(commands.c.id > last_id).order_by(commands.c.id)
        ).all()
    return [Command(r.id, r.fqfn, json.loads(r.instances), r.command, r.epoch) for r in rows]


def last_command_id(store: Store) -> int:
    """The newest command id (0 if none)."""
    with store.read() as conn:
        return int(conn.execute(select(func.max(commands.c.id))).scalar() or 0)


HOST = socket.gethostname()


def register_object(store: Store, control_id: str, instance_id: int, epoch: int) -> int:
    """A worker process created a user object; returns its id."""
    with store.write() as conn:
        result = conn.execute(
            insert(objects).values(
                fqfn=control_id,
                instance_id=instance_id,
                epoch=epoch,
                host=HOST,
                pid=os.getpid(),
                created_at=utc_now(),
            )
        )
        return int(result.inserted_primary_key[0])


def mark_closed(
    store: Store, control_id: str, object_id: int, closed_by: str, error: str | None = None
) -> None:
    """A worker process closed a user object of run ``control_id`` (``error``: ``close()`` raised).

    Touches the run's hint: the supervisor waiting for its objects looks at once.
    """
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(control_id))
        conn.execute(
            update(objects)
            .where(and_(objects.c.id == object_id, objects.c.closed_at.is_(None)))
            .values(closed_at=utc_now(), closed_by=closed_by, close_error=error)
        )


@dataclass(frozen=True)
class OpenObject:
    """A user object not closed (yet)."""

    id: int
    instance_id: int
    host: str
    pid: int
    alive: bool | None  # None: on another host, unknown

    def __str__(self) -> str:
        where = f"pid {self.pid} on {self.host}"
        gone = "" if self.alive in (True, None) else " (the process is gone)"
        return f"instance {self.instance_id} in {where}{gone}"


def open_objects(store: Store, control_id: str, instance_ids: Iterable[int]) -> list[OpenObject]:
    """Objects of these instances that are not closed."""
    wanted = list(instance_ids)
    with store.read() as conn:
        rows = conn.execute(
            select(objects).where(
                and_(
                    objects.c.fqfn == control_id,
                    objects.c.closed_at.is_(None),
                    objects.c.instance_id.in_(wanted),
                )
            )
        ).all()
    return [OpenObject(r.id, r.instance_id, r.host, r.pid, _alive(r.host, r.pid)) for r in rows]


def _alive(host: str, pid: int) -> bool | None:
    if host != HOST:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
