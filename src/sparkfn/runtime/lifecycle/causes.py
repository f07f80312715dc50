"""What a supervisor tells about a failure: the failure its policy decides on, and the text.

Pure functions (no I/O): :func:`failure_of` turns the deaths recorded in a
run's control record, or the target failing as a whole, into the
:class:`~sparkfn.api.errors.FunctionFailure` a failure handler receives;
:func:`escalated` and :func:`fenced` are the causes the supervisor records
when it escalates past ``max_restarts`` or finds its run replaced;
:func:`short_error` is the user-facing line of a Spark error and
:func:`user_traceback` the traceback a user can read in it. Spark's own
text (Py4J's call lines, Java's classes and stack) reaches no user: the
supervisor logs it whole for the operator (the worker's log).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.policy import FailurePolicy
from sparkfn.runtime.lifecycle.control import InstanceRecord

# What Spark says when a task's Python worker ended under it (os._exit, a signal, the OOM killer).
WORKER_CRASHED = "Python worker exited unexpectedly"
# sparkfn's line for a task's worker that died, with its exit status (runtime/lifecycle/poison.py).
_SAID_CRASH = re.compile(r"^Python worker .+ while processing a message of function \S+$")
# Py4J's line for a failed call into the JVM: an object id and a method, nothing of the cause.
_PY4J_CALL = re.compile(r"^(?:(?:py4j\.protocol\.)?Py4J\w*: )?An error occurred while calling \S+")
# A Java exception's class name before its message ("org.apache.spark.SparkException: ").
_JAVA_CLASS = re.compile(r"^:?\s*((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)):\s*")
# Python's first line of a traceback.
_TRACEBACK = "Traceback (most recent call last):"
# A frame of a Java stack ("\tat org.apache.spark.X.y(X.scala:1)") or a chained Java cause.
_JAVA_FRAME = re.compile(r"^\s+at [\w$.<>]+\(|^Caused by: ", re.MULTILINE)


def short_error(text: str) -> str:
    """The user-facing part of a Spark error: sparkfn's message if it is in there.

    Never a bare Py4J call line ("An error occurred while calling
    o86.collectToPython"): a task's crashed Python worker is said in sparkfn's
    words (with its exit status when a poison hunt put it first:
    :meth:`~.poison.PoisonHunter.explained`), a Java exception by its message
    without its class name.
    """
    lines = text.splitlines()
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(("sparkfn.", "function ")) or "Error: function " in stripped:
            return stripped
        if _SAID_CRASH.match(stripped):  # a poison hunt's line: the worker's exit status
            return stripped
    if WORKER_CRASHED in text:
        return (
            "a Python worker exited unexpectedly while running a batch of the query "
            "(its process ended: os._exit, a signal, the OOM killer)"
        )
    # A Python worker's failure: its exception is the first unindented line
    # after the frames of the last traceback ("RuntimeError: db unreachable").
    _, marker, frames = text.rpartition("Traceback (most recent call last):")
    if marker:
        for line in frames.splitlines()[1:]:
            if line.strip() and not line[0].isspace() and not _PY4J_CALL.match(line):
                return line.strip()
    said = [line.strip() for line in lines if line.strip() and not _PY4J_CALL.match(line)]
    if said:
        return _JAVA_CLASS.sub("", said[0]) or said[0]
    return lines[0].strip() if lines else text


# Words of Py4J's or Java's in an error's text: a call line, a Java class or stack frame.
_SPARK_WORDS = re.compile(
    r"py4j|An error occurred while calling|\b(?:org\.apache|java\.\w+)\.\w|^\s+at [\w$.<>]+\(",
    re.IGNORECASE | re.MULTILINE,
)


def user_text(text: str) -> str:
    """``text`` as it is if it holds no Py4J or Java words, else its :func:`short_error`
    (a sparkfn sentence if that still names a Py4J object): for an exception's text that
    may come from a call into the JVM (a start, a probe of the session)."""
    if not _SPARK_WORDS.search(text):
        return text
    said = short_error(text)
    return "a call into the Spark JVM failed" if _SPARK_WORDS.search(said) else said


def user_traceback(text: str) -> str:
    """The traceback a user can read in a Spark error: the last Python traceback of a task
    (its frames and its exception line), "" if there is none (a worker that died, a Java error).

    A traceback that ends in a Py4J call, or holds Py4J's frames or Java's, is the
    driver's own call into the JVM, not the user's code: it is skipped.
    """
    for block in reversed(text.split(_TRACEBACK)[1:]):
        frames: list[str] = []
        for line in block.splitlines()[1:]:
            if not line.strip():
                continue
            frames.append(line.rstrip())
            if not line[0].isspace():  # the exception's line ends the traceback
                break
        else:
            continue  # cut short: no exception line
        said = "\n".join([_TRACEBACK, *frames])
        if "py4j" in said.lower() or _JAVA_FRAME.search(said):
            continue
        return said + "\n"
    return ""


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
        kind = "PythonWorkerCrashed" if WORKER_CRASHED in (error or "") else "QueryFailed"
        text = error or ""
        cause = DeathCause(kind, short_error(text), user_traceback(text), "failure", "")
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
