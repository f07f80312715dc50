"""The run's state machine: which :class:`RunState` may follow which.

A run (a function, sink or source as a whole) moves
``CREATED -> STARTING -> RUNNING -> (RESTARTING -> RUNNING)* -> STOPPING ->
STOPPED | SUSPENDED | ERROR``. A death may end a run from any live state
(``ERROR``), a stop may arrive in any live state (``STOPPING``), and a user
may start an ended run again (``STARTING``). One source instance's thread
(:class:`~sparkfn.connectors.runner.SourceRunner`) lives once: it never
restarts; the supervisor replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkfn.api.lifecycle import RunState

FINAL_STATES = frozenset({RunState.STOPPED, RunState.SUSPENDED, RunState.ERROR})

RUN_TRANSITIONS: Mapping[RunState, frozenset[RunState]] = {
    RunState.CREATED: frozenset({RunState.STARTING, RunState.STOPPED, RunState.SUSPENDED}),
    RunState.STARTING: frozenset({RunState.RUNNING, RunState.STOPPING, RunState.ERROR}),
    RunState.RUNNING: frozenset({RunState.RESTARTING, RunState.STOPPING, RunState.ERROR}),
    RunState.RESTARTING: frozenset({RunState.RUNNING, RunState.STOPPING, RunState.ERROR}),
    RunState.STOPPING: FINAL_STATES,
    RunState.STOPPED: frozenset({RunState.STARTING}),
    RunState.SUSPENDED: frozenset({RunState.STARTING}),
    RunState.ERROR: frozenset({RunState.STARTING}),
}

INSTANCE_TRANSITIONS: Mapping[RunState, frozenset[RunState]] = {
    RunState.CREATED: frozenset({RunState.STARTING, RunState.STOPPED, RunState.SUSPENDED}),
    RunState.STARTING: frozenset({RunState.RUNNING, RunState.STOPPING}),
    RunState.RUNNING: frozenset({RunState.STOPPING}),
    RunState.STOPPING: FINAL_STATES,
}


def can_move(
    old: RunState, new: RunState, table: Mapping[RunState, frozenset[RunState]] = RUN_TRANSITIONS
) -> bool:
    """Whether ``table`` allows ``old -> new``."""
    return new in table.get(old, frozenset())
