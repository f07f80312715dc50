"""Commit hints: files whose modification time changes when something is committed.

An idle function's reader asks "is there anything new?" ten times a second;
answering from the store costs a few queries each time, most of an idle
function's CPU. A transaction that appends to a topic names the topic's
hint, one that changes a run's lifecycle record (a stop, a death) the run's
(:func:`hint_on_commit`); :meth:`Store.write` touches the hint's file
once the transaction has committed, and a reader compares the files'
modification times (:func:`stamp`, a ``stat`` per topic) before asking the
store. Hints only save work, they are never the truth: a touch can be lost
(a crash between commit and touch) or arrive late (another machine's write
on a shared data directory), so readers still ask the store at least every
second.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import Connection

HINTS_DIR = "hints"
_PENDING = "sparkfn_hints"  # the connection's ``info`` key: hints to touch on commit


def topic_hint(topic_id: int) -> str:
    """The hint of a topic's appends."""
    return f"topic-{topic_id}"


def control_hint(control_id: str) -> str:
    """The hint of a run's lifecycle record (commands, deaths, instance states)."""
    return "control-" + control_id.replace("/", "_").replace(":", "_")


# The hint of the supervisors' commands to worker processes (close, cancel).
COMMANDS_HINT = "commands"


def hint_on_commit(conn: Connection, name: str) -> None:
    """Touch hint ``name`` when ``conn``'s write transaction commits."""
    conn.info.setdefault(_PENDING, set()).add(name)


def discard(conn: Connection) -> None:
    """Forget ``conn``'s pending hints (its transaction rolled back)."""
    conn.info.pop(_PENDING, None)


def touch_pending(conn: Connection, data_dir: Path) -> None:
    """Touch ``conn``'s pending hints (its transaction committed)."""
    names = conn.info.pop(_PENDING, None)
    if not names:
        return
    for name in names:
        touch(data_dir, name)


def touch(data_dir: Path, name: str) -> None:
    """Touch hint ``name`` now: whoever waits on it looks at the store at once."""
    folder = data_dir / HINTS_DIR
    path = folder / name
    try:
        os.utime(path)
    except FileNotFoundError:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.touch()
        except OSError:
            pass
    except OSError:  # a hint is an optimisation: never fail a committed write for it
        pass


def stamp(data_dir: Path, names: Iterable[str]) -> tuple[int, ...]:
    """The hints' modification times (0 for a hint never touched): compare two for a change."""
    folder = data_dir / HINTS_DIR
    out = []
    for name in names:
        try:
            out.append(os.stat(folder / name).st_mtime_ns)
        except OSError:
            out.append(0)
    return tuple(out)


def wait_for_change(
    data_dir: Path, names: list[str], seen: tuple[int, ...], timeout: float, poll: float
) -> tuple[int, ...]:
    """Wait up to ``timeout`` s for a hint in ``names`` to change from ``seen``; the stamp now.

    A ``stat`` per hint every ``poll`` s: far cheaper than asking the store,
    and no process other than the waiting one wakes.
    """
    deadline = time.monotonic() + timeout
    while True:
        now = stamp(data_dir, names)
        left = deadline - time.monotonic()
        if now != seen or left <= 0:
            return now
        time.sleep(min(poll, left))
