"""The one bounded wait of the test suite: poll until something holds, or fail saying what.

>>> state = until(lambda: run.status().state == "RUNNING", "the run RUNNING", timeout=120)

Each test keeps its own timeout (passed in, or bound once per module with
``functools.partial``); a failure names what did not happen and after how long,
without a traceback into this module. :data:`WAIT` is the usual one for work
that runs on Spark.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

WAIT = 180.0
"""Seconds to wait for work that runs on Spark (a start, a batch, a drain) before failing.

Generous: the suite shares the machine's two cores with several JVMs, and
a stop once took over 90 s. Only a hang reaches it; a module whose waits
are shorter by nature (no Spark, a child's first line) keeps its own.
"""


def until(
    check: Callable[[], T],
    what: str | Callable[[], str],
    timeout: float,
    *,
    every: float = 0.1,
) -> T:
    """Call ``check`` every ``every`` seconds until it gives something true, and return that.

    After ``timeout`` seconds the test fails with ``timed out after <timeout> s
    waiting for <what>``; ``what`` may be a callable, asked only then (to say
    how far things got).
    """
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            pytest.fail(f"timed out after {timeout} s waiting for {said}", pytrace=False)
        time.sleep(every)
    return found
