"""The lifecycle's state machines, and the one :func:`transition` every mover goes through.

Three things carry a :class:`RunState`, each with its own table of legal moves:

* a **run** (a function, sink or source as a whole: the supervisor, and the
  function's row of the stored control record) moves ``CREATED -> STARTING ->
  RUNNING -> (RESTARTING -> RUNNING)* -> STOPPING -> STOPPED | SUSPENDED |
  ERROR``. A death may end a live run (``ERROR``), a stop may arrive in any live
  state (``STOPPING``), a death while stopping gracefully is replaced so that the
  drain or suspend ends (``RESTARTING``), a running run whose input is quiet
  is parked and woken (``RUNNING -> PARKED -> RUNNING``), and a user may start
  an ended run again (``STARTING``):
  :data:`RUN_TRANSITIONS`;
* an **instance** in the stored control record ends with its run (``STOPPED``,
  ``SUSPENDED``), dies on its own (``ERROR`` from any live state), is replaced
  after a backoff (``RESTARTING``) and takes input again (``RUNNING``), or is
  stopped alone (``STOPPED``): :data:`INSTANCE_TRANSITIONS`;
* a user's **start** begins a new run from any state: a record left live by a
  process that died is superseded (:data:`START_TRANSITIONS`), and the
  instances beyond its parallelism end (:data:`RETIRE`);
* one source instance's **runner thread**
  (:class:`~sparkfn.connectors.source.runner.SourceRunner`) lives once: ``CREATED ->
  STARTING -> RUNNING -> STOPPING -> STOPPED | SUSPENDED | ERROR``; it never
  restarts, the supervisor replaces it: :data:`RUNNER_TRANSITIONS`.

:func:`transition` raises :class:`IllegalTransition` on any other move, and
every writer of a state goes through it: the supervisor's own state
(:meth:`~.supervisor_core.SupervisorCore._move`), the runner thread's, and
every write of the stored record, which :func:`~.moves.move` checks and
records in ``function_transitions`` (``set_state``, ``begin_run``,
``request_stop``, ``record_death``, ``revive``, ``move_run`` for parking); a
missing record is refused too. No caller catches :class:`IllegalTransition`
to go on: the supervisor's thread ends the run in ``ERROR`` with it as the
cause (:meth:`~.supervisor_core.SupervisorCore._defect`), a runner thread
dies of it (its final move's refusal is raised once it is done), and a move
asked from another thread raises to the one who asked. A mover that may race with another (a stop request meeting a run
that ended, a late report of a source thread's own end) says so, and the race
is an outcome it acts on, never a move silently dropped: it checks
:data:`FINAL_STATES` itself, or names the records it leaves as they are
(:func:`~.moves.set_state` returns them). A move to the state already held is
not a transition and is allowed everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkfn.api.lifecycle import RunState

FINAL_STATES = frozenset({RunState.STOPPED, RunState.SUSPENDED, RunState.ERROR})

Table = Mapping[RunState, frozenset[RunState]]

RUN_TRANSITIONS: Table = {
    RunState.CREATED: frozenset({RunState.STARTING, RunState.STOPPED, RunState.SUSPENDED}),
    RunState.STARTING: frozenset({RunState.RUNNING, RunState.STOPPING, RunState.ERROR}),
    RunState.RUNNING: frozenset(
        {RunState.RESTARTING, RunState.STOPPING, RunState.ERROR, RunState.PARKED}
    ),
    RunState.RESTARTING: frozenset({RunState.RUNNING, RunState.STOPPING, RunState.ERROR}),
    # an idle run's query is stopped until input arrives (parking.py); a stop
    # or a failure of the query's start again may follow
    RunState.PARKED: frozenset(
        {RunState.RUNNING, RunState.STOPPING, RunState.RESTARTING, RunState.ERROR}
    ),
    # a death while stopping gracefully is replaced, so that the drain or suspend ends
    RunState.STOPPING: FINAL_STATES | frozenset({RunState.RESTARTING}),
    RunState.STOPPED: frozenset({RunState.STARTING}),
    RunState.SUSPENDED: frozenset({RunState.STARTING}),
    RunState.ERROR: frozenset({RunState.STARTING}),
}

_ENDS = frozenset({RunState.STOPPING, RunState.ERROR, RunState.STOPPED, RunState.SUSPENDED})

INSTANCE_TRANSITIONS: Table = {
    RunState.CREATED: frozenset(
        {RunState.STARTING, RunState.RUNNING, RunState.STOPPED, RunState.SUSPENDED}
    ),
    # a live instance ends with its run (STOPPED, SUSPENDED without a STOPPING of its
    # own), dies alone (ERROR) or is replaced after a backoff (RESTARTING)
    RunState.STARTING: _ENDS | frozenset({RunState.RUNNING, RunState.RESTARTING}),
    RunState.RUNNING: _ENDS | frozenset({RunState.RESTARTING}),
    RunState.RESTARTING: _ENDS | frozenset({RunState.RUNNING}),
    RunState.STOPPING: FINAL_STATES | frozenset({RunState.RESTARTING}),
    # an instance that died waits for the policy: replaced, or left in ERROR
    RunState.ERROR: frozenset({RunState.STARTING, RunState.RESTARTING, RunState.RUNNING}),
    RunState.STOPPED: frozenset({RunState.STARTING, RunState.RUNNING}),
    RunState.SUSPENDED: frozenset({RunState.STARTING, RunState.RUNNING}),
}

# A user's start begins a new run whatever the record says. A record still live
# (STARTING, RUNNING, RESTARTING, STOPPING) when a run begins was left so by a
# process that ended without recording its end (a worker killed or crashed); the
# new run's start supersedes it, and its cause says so (control.begin_run).
START_TRANSITIONS: Table = {state: frozenset({RunState.STARTING}) for state in RunState}

# A user's start with a lower parallelism ends the instances beyond it, whatever
# their record says (left so by the run it supersedes).
RETIRE: Table = {state: frozenset({RunState.STOPPED}) for state in RunState}

RUNNER_TRANSITIONS: Table = {
    RunState.CREATED: frozenset({RunState.STARTING, RunState.STOPPED, RunState.SUSPENDED}),
    RunState.STARTING: frozenset({RunState.RUNNING, RunState.STOPPING}),
    RunState.RUNNING: frozenset({RunState.STOPPING}),
    RunState.STOPPING: FINAL_STATES,
}


class IllegalTransition(RuntimeError):
    """A move its state machine does not allow: a defect in sparkfn, never a user's error."""


def can_move(old: RunState, new: RunState, table: Table = RUN_TRANSITIONS) -> bool:
    """Whether ``table`` allows ``old -> new`` (staying in ``old`` is always allowed)."""
    return new == old or new in table.get(old, frozenset())


def transition(old: RunState | str, new: RunState | str, table: Table, what: str) -> RunState:
    """The state after moving ``what`` from ``old`` to ``new``; raises if ``table`` forbids it."""
    before, after = RunState(old), RunState(new)
    if not can_move(before, after, table):
        msg = f"{what}: {before} -> {after} is not a legal move"
        raise IllegalTransition(msg)
    return after
