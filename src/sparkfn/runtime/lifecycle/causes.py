"""What a supervisor tells about a failure: the failure its policy decides on, and the text.

Pure functions (no I/O): :func:`failure_of` turns the deaths recorded in a
run's control record, or the target failing as a whole, into the
:class:`~sparkfn.api.errors.FunctionFailure` a failure handler receives;
:func:`escalated` and :func:`fenced` are the causes the supervisor records
when it escalates past ``max_restarts`` or finds its run replaced;
:func:`short_error` is the user-facing line of a Spark error.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.policy import FailurePolicy
from sparkfn.runtime.lifecycle.control import InstanceRecord


def short_error(text: str) -> str:
    """The user-facing part of a Spark error: sparkfn's message if it is in there."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("sparkfn.", "function ")) or "Error: function " in stripped:
            return stripped
    # A Python worker's failure: its exception is the first unindented line
    # after the frames of the last traceback ("RuntimeError: db unreachable").
    _, marker, frames = text.rpartition("Traceback (most recent call last):")
    if marker:
        for line in frames.splitlines()[1:]:
            if line.strip() and not line[0].isspace():
                return line.strip()
    first = text.strip().splitlines()
    return first[0] if first else text


def failure_of(
    name: str, deaths: Sequence[InstanceRecord], error: str | None, live: list[int]
) -> tuple[FunctionFailure, list[int]]:
    """The failure and the failed instances: the unhandled ``deaths`` (the first
    one's cause), else the target's ``error`` as a failure of the ``live`` ones."""
    if deaths:
        failed = sorted(d.instance_id for d in deaths)
        first = min(deaths, key=lambda d: (d.died_at is None, d.died_at or 0))
        cause = first.death or DeathCause("Error", "unknown")
        fatal = any(d.fatal for d in deaths)
    else:
        failed = live
        cause = DeathCause("QueryFailed", short_error(error or ""), error or "", "failure", "")
        fatal = False
    return FunctionFailure(name, failed[0] if len(failed) == 1 else None, cause, fatal), failed


def escalated(cause: DeathCause, policy: FailurePolicy) -> DeathCause:
    """``cause``, saying that restarting was given up."""
    return DeathCause(
        cause.type,
        f"{cause.message} (escalated: more than {policy.max_restarts} restarts "
        f"within {policy.restart_window:g} s)",
        cause.traceback,
        cause.origin,
        cause.thread,
    )


def fenced(kind: str, name: str, epoch: int, newer: int, thread: str) -> DeathCause:
    """Why a run whose record a newer run took over stopped."""
    return DeathCause(
        "StaleRunError",
        f"{kind} {name}: run epoch {epoch} was replaced by a newer run (epoch {newer}); "
        "it stopped without committing more",
        "",
        "fenced",
        thread,
    )
