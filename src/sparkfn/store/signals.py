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


# How long a waiter goes without asking the store, whatever the hints say
# (:func:`recheck_seconds`).
LOCAL_RECHECK_SECONDS = 5.0
SHARED_RECHECK_SECONDS = 1.0

# The hint of the supervisors' commands to worker processes (close, cancel).
COMMANDS_HINT = "commands"

# The hint of topic creations: readers of a topics_pattern look for new topics
# (:mod:`sparkfn.topics.discovery`).
TOPICS_HINT = "topics"


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
    """The hints' modification times (0 for a hint never touched): compare two for a change.

    A group's reader stamps a hint per member input and record (2,000 for a
    thousand idle members) at every look, so the paths are plain strings
    (``pathlib`` took most of the time) and ``os.stat`` is bound once.
    """
    folder = f"{os.fspath(data_dir)}/{HINTS_DIR}/"
    stat = os.stat
    out: list[int] = []
    append = out.append
    for name in names:
        try:
            append(stat(folder + name).st_mtime_ns)
        except OSError:
            append(0)
    return tuple(out)


# Where the kernel announces every touch (a local store), the store is asked
# anyway only as a net for a touch lost to a crash; a look that costs much
# (a group of a thousand members: ~0.15 s) is spaced so that the net takes
# at most this share of a core.
NET_CPU_SHARE = 0.01


def net_pause(recheck: float, cost: float) -> float:
    """How long to wait before the next net look that found nothing, after one that took
    ``cost`` CPU seconds: ``recheck`` (:func:`recheck_seconds`), lengthened to keep the
    net under :data:`NET_CPU_SHARE` of a core where hints are announced (a shared
    store's short recheck is how remote writers are seen: kept as it is)."""
    if recheck < LOCAL_RECHECK_SECONDS:
        return recheck
    return max(recheck, cost / NET_CPU_SHARE)


def recheck_seconds(store_url: str) -> float:
    """How long a waiter on this store's hints may go without asking the store itself.

    With SQLite every writer is a process on this machine (SQLite is not
    shared between machines), so the kernel announces every touch and only
    a crash between a commit and its touch goes unannounced: 5 s. With
    PostgreSQL, writers on other machines touch hints on a shared data
    directory, which this machine's kernel does not announce and whose
    ``stat`` may lag: 1 s, the longest a message waits for that reason.
    """
    return LOCAL_RECHECK_SECONDS if store_url.startswith("sqlite") else SHARED_RECHECK_SECONDS
