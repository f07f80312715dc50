"""Who was in a group's batch that failed: the members to take out when it keeps failing.

A member's code can fail its whole task where no ``except`` reaches: it
ends its Python worker (``os._exit``, a segfault, the OOM killer). The
task's slices of the other members go with it, the batch fails, and the
group's query, started again, runs the same batch again: every member
would wait forever behind the one. The members in that batch are the ones
whose plan (:func:`sparkfn.topics.subscription.plan_batch`) for it is still
uncommitted. :class:`~sparkfn.runtime.group.run.QueryGroup` then asks the
reader to run that batch again *isolated*: each suspect alone in a task of
its own, the task's index recorded with the member (:func:`request_isolation`,
:func:`record_isolation`). Spark names the failed task's index in its error
("Task 3 in stage ..."), so the next failure names the member at fault, and
only that one leaves the group, for a query of its own where its own failure
handling finds the message (or the instance) at fault without holding anyone
else. Where the index cannot be read, the suspects leave (half of them at a
time when there are many).

A member that leaves for a dead worker is said with the worker's exit status
("Python worker exited with code 3 while processing a message of function
f"), as a function's own query says it: each group task has the daemon
write the status of a worker that dies in it (:func:`exit_file`,
:func:`sparkfn.runtime.spark.daemon.note_exit_to`), named after the task's
first member, which an isolated task's only member is.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import quote, unquote

from sparkfn.runtime.group.members import Member, members
from sparkfn.store.store import Store
from sparkfn.topics.subscription import read_plan

GEN_KEY = "__gen__"
# How a failure reads when a task's Python worker died under it.
CRASH_SIGNS = ("Python worker exited unexpectedly", "crashed", "EOFException")
# Up to this many suspects are all taken out at once; more, half at a time.
ALL_AT_ONCE = 8


def is_crash(error: str) -> bool:
    """Whether a failure of the group's query says a Python worker died."""
    return any(sign in error for sign in CRASH_SIGNS)


def failed_batch(store: Store, group: str) -> list[Member]:
    """The members whose plan for the group's latest planned batch is uncommitted."""
    with store.read() as conn:
        found = members(conn, group, store.sealer)
        plans = {m.control_id: read_plan(conn, m.config.subscription) for m in found}
    by_gen: dict[int, list[Member]] = {}
    for member in found:
        plan = plans[member.control_id]
        if plan is None or plan.committed or plan.epoch != member.epoch:
            continue
        gen = int(json.loads(plan.spark_end).get(GEN_KEY, 0))
        by_gen.setdefault(gen, []).append(member)
    return by_gen[max(by_gen)] if by_gen else []


def to_take_out(suspects: list[Member]) -> list[Member]:
    """All the suspects when they are few, else half of them (the next failure halves again)."""
    if len(suspects) <= ALL_AT_ONCE:
        return suspects
    return suspects[: len(suspects) // 2]


_TASK = re.compile(r"Task (\d+) in stage [\d.]+ failed")


def failed_task(error: str) -> int | None:
    """The index of the task whose failure failed the batch, as Spark's error names it."""
    found = _TASK.search(error)
    return int(found.group(1)) if found else None


def _folder(data_dir: str | Path, group: str) -> Path:
    return Path(data_dir) / "groups" / group


def request_isolation(data_dir: str | Path, group: str, suspects: list[str]) -> None:
    """Ask the reader to plan its next batch with each of ``suspects`` in a task of its own."""
    folder = _folder(data_dir, group)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "isolate.json").write_text(json.dumps(sorted(suspects)))


def take_isolation(data_dir: str | Path, group: str) -> set[str]:
    """The reader's side: the members to isolate in the batch it plans now (asked once)."""
    path = _folder(data_dir, group) / "isolate.json"
    try:
        found = set(json.loads(path.read_text()))
        path.unlink()
    except (OSError, ValueError):
        return set()
    return found


def record_isolation(data_dir: str | Path, group: str, tasks: dict[int, str]) -> None:
    """The reader's side: which isolated member each task index of the batch runs."""
    folder = _folder(data_dir, group)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "isolated.json").write_text(json.dumps({str(k): v for k, v in tasks.items()}))


def isolated_tasks(data_dir: str | Path, group: str) -> dict[int, str] | None:
    """The last isolated batch's task indexes and members (taken: read once), or None."""
    path = _folder(data_dir, group) / "isolated.json"
    try:
        found = json.loads(path.read_text())
        path.unlink()
    except (OSError, ValueError):
        return None
    return {int(k): v for k, v in found.items()}


def exits_folder(data_dir: str | Path, group: str) -> Path:
    """Where the group's tasks have the exit statuses of their dead workers written."""
    return _folder(data_dir, group) / "exits"


def exit_file(data_dir: str | Path, group: str, control_id: str) -> Path:
    """The exit status file of a task whose first member is ``control_id``."""
    return exits_folder(data_dir, group) / quote(control_id, safe="")


def take_exits(data_dir: str | Path, group: str, wait: float = 0.0) -> dict[str, int]:
    """The exit statuses written since the last call, by member (taken: read once);
    waits up to ``wait`` seconds for the first (the daemon writes it as its worker ends)."""
    folder = exits_folder(data_dir, group)
    deadline = time.monotonic() + wait
    found: dict[str, int] = {}
    while True:
        for path in folder.glob("[!.]*"):
            try:
                found[unquote(path.name)] = int(path.read_text())
            except (OSError, ValueError):
                continue
            path.unlink(missing_ok=True)
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)
