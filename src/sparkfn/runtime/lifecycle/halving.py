"""The pure parts of the poison-message hunt (:mod:`.poison`): no I/O.

How a worker's crash is recognised in Spark's error (:func:`worker_crashed`),
how an exit status reads (:func:`describe_exit`), and the halving of a
failed batch until one message crashes a batch of its own (:class:`Hunt`).
"""

from __future__ import annotations

import math
import os
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparkfn.topics.subscription import PartitionKey, Span

# Probes beyond log2 of the batch's size: the lone message's own run, and slack.
EXTRA_PROBES = 3

# Spark's words for a task whose Python worker died under it (pyspark 3.5 to 4.x):
# BasePythonRunner's reader meets the end of the worker's stream mid-task.
_CRASHED = re.compile(r"Python worker exited unexpectedly \(crashed\)")
_TASK_FAILED = "Job aborted due to stage failure"


def worker_crashed(error: str) -> bool:
    """Whether a query failure says a task's Python worker died under it.

    Not a Python exception in a task (``PythonException``), nor the query's
    source runner dying, nor the commit failing: only the job aborted
    because a task's worker ended without a word.
    """
    return _TASK_FAILED in error and _CRASHED.search(error) is not None


def describe_exit(status: int | None) -> str:
    """How a worker ended, from its wait status (``os.waitpid``); ``None``: not known."""
    if status is None:
        return "exited unexpectedly (its exit status is not known)"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            return f"was killed by signal {number}"
        return f"was killed by signal {number} ({name})"
    return f"exited with code {os.WEXITSTATUS(status)}"


@dataclass
class Hunt:
    """The search of one failed batch for the message that crashes it (no I/O).

    The batch's messages are its spans' in order; from the cursors ``at``,
    the first ``bad`` of them crashed a batch. ``probe`` is the size of the
    probe started last (0: none yet).
    """

    spans: tuple[Span, ...]
    at: dict[PartitionKey, int]
    bad: int
    budget: int
    probes: int = 0
    probe: int = 0
    crashes: int = 1
    alone: bool = False  # the last crash was of one message run alone

    @classmethod
    def begin(cls, spans: Sequence[Span]) -> Hunt:
        """The hunt of a batch of ``spans`` that crashed as a whole."""
        data = tuple(s for s in spans if s.end > s.start)
        n = sum(s.end - s.start for s in data)
        budget = math.ceil(math.log2(max(n, 1))) + EXTRA_PROBES
        return cls(data, {s.key: s.start for s in data}, n, budget)

    def _clamped(self, cursors: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
        return {s.key: min(max(cursors.get(s.key, s.start), s.start), s.end) for s in self.spans}

    def left(self, cursors: Mapping[PartitionKey, int]) -> int:
        """Messages of the batch after ``cursors``."""
        at = self._clamped(cursors)
        return sum(s.end - at[s.key] for s in self.spans)

    def advanced(self, cursors: Mapping[PartitionKey, int], k: int) -> dict[PartitionKey, int]:
        """The cursors after the next ``k`` messages of the batch from ``cursors``."""
        out = self._clamped(cursors)
        for s in self.spans:
            take = min(k, s.end - out[s.key])
            out[s.key] += take
            k -= take
        return out

    def passed(self, cursors: Mapping[PartitionKey, int]) -> bool:
        """Whether what committed since ``at`` took in the messages known to crash
        (a new failure is then another batch's)."""
        return self.left(self.at) - self.left(cursors) >= self.bad or self.left(cursors) == 0

    def crashed(self, cursors: Mapping[PartitionKey, int]) -> None:
        """The query failed again; ``cursors`` are where the subscription is now."""
        committed = self.left(self.at) - self.left(cursors)
        self.crashes += 1
        if committed == 0 and self.probe:  # the probe's own batch crashed
            self.bad = self.probe
        elif self.advanced(self.at, committed) == self._clamped(cursors):
            self.bad -= committed  # a probe committed; a later batch crashed
        else:  # committed otherwise than a prefix: all that is left is suspect
            self.bad = self.left(cursors)
        self.alone = committed == 0 and self.probe == 1
        self.at = self._clamped(cursors)

    @property
    def found(self) -> bool:
        """One message crashed a batch of its own."""
        return self.alone and self.bad == 1

    @property
    def exhausted(self) -> bool:
        """The probes are used up: the crash does not follow one message."""
        return self.probes >= self.budget

    def next_probe(self) -> dict[PartitionKey, int]:
        """The ends of the next probe: the first half of the suspects (one alone at the last)."""
        self.probe = max(1, self.bad // 2)
        self.probes += 1
        ends = self.advanced(self.at, self.probe)
        return {k: e for k, e in ends.items() if e > self.at[k]}

    def culprit(self) -> tuple[PartitionKey, int]:
        """The message found: its partition and offset."""
        for s in self.spans:
            if self.at[s.key] < s.end:
                return s.key, self.at[s.key]
        msg = "the hunt has no message left"
        raise LookupError(msg)
