"""A member past its time budget, reported from the task that runs it.

A group's batch ends when its last task does, so one member that blocks in
``process()`` (a 60 s sleep, a hung call) would hold every other member of
the group. The task that runs a slice starts a timer; when the slice runs
past the member's budget, the timer writes a report here (a file under the
data directory, which every executor shares with the driver) and touches
the group's overrun hint. The group's driver side
(:class:`~sparkfn.runtime.group.run.QueryGroup`) takes the member out of
the group and cancels the stuck batch, which Spark then runs again without
it: the others wait for the budget and one batch's restart, not for the
blocked call.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from urllib.parse import quote, unquote

from sparkfn.store import signals


def overrun_hint(group: str) -> str:
    """The hint touched when a member of ``group`` runs past its time budget."""
    return "group-overrun-" + group.replace("/", "_").replace(":", "_")


def _folder(data_dir: str | Path, group: str) -> Path:
    return Path(data_dir) / "groups" / group / "overrun"


def report(data_dir: str | Path, group: str, control_id: str, epoch: int, budget: float) -> None:
    """Say that ``control_id``'s slice (run ``epoch``) has run past ``budget`` seconds."""
    folder = _folder(data_dir, group)
    folder.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"epoch": epoch, "budget": budget})
    (folder / quote(control_id, safe="")).write_text(body)
    signals.touch(Path(data_dir), overrun_hint(group))


def take(data_dir: str | Path, group: str) -> list[tuple[str, int, float]]:
    """The reports not taken yet, as ``(control id, epoch, budget)``; each is taken once."""
    folder = _folder(data_dir, group)
    found = []
    for path in sorted(folder.glob("*")) if folder.is_dir() else []:
        try:
            body = json.loads(path.read_text())
            path.unlink()
        except (OSError, ValueError):
            continue  # taken meanwhile, or half written: its writer touches the hint again
        found.append((unquote(path.name), int(body["epoch"]), float(body["budget"])))
    return found


class SliceWatch:
    """The one watchdog thread of a Python worker process: it reports the slice running now
    once it has run past its budget.

    A timer thread per slice cost more than the slices themselves (starting a
    thread waits for it to run): a batch of 200 one-message slices spent a
    third of its task time starting and cancelling timers. The watch thread
    wakes every :data:`CHECK_SECONDS`; a slice is reported at most that late.
    """

    CHECK_SECONDS = 0.25

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: tuple[float, tuple[str | Path, str, str, int, float]] | None = None
        self._thread: threading.Thread | None = None

    def begin(
        self, data_dir: str | Path, group: str, control_id: str, epoch: int, budget: float | None
    ) -> None:
        """A slice starts on this thread (one at a time per process: tasks run one by one)."""
        if budget is None:
            return
        with self._lock:
            self._current = (
                time.monotonic() + budget,
                (data_dir, group, control_id, epoch, budget),
            )
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="sparkfn-slice-watch", daemon=True
                )
                self._thread.start()

    def end(self) -> None:
        """The slice ended (returned or raised)."""
        with self._lock:
            self._current = None

    def _run(self) -> None:
        while True:
            time.sleep(self.CHECK_SECONDS)
            with self._lock:
                current = self._current
                if current is None or time.monotonic() < current[0]:
                    continue
                self._current = None  # reported once
            report(*current[1])


SLICES = SliceWatch()
