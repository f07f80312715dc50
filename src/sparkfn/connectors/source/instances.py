"""All instances of one source: ``parallelism`` runners.

>>> group = SourceInstances(config, store)
>>> group.start()
>>> group.stop("drain")
>>> group.wait(timeout=30)
True
>>> group.state
<RunState.STOPPED: 'STOPPED'>

Instances are independent: one that dies does not stop the others. What
follows a death is the failure policy's business: a source run
(:class:`~sparkfn.connectors.source.source_run.SourceRun`, which ``sparkfn sources
localrun`` uses) puts the group under the one
:class:`~sparkfn.runtime.lifecycle.supervisor.Supervisor`, for which this
class is the run target: the supervisor replaces a dead instance's runner
(``REPLACE_INSTANCE``), lets the others run (``SHUTDOWN_INSTANCE``) or
cancels them (``SHUTDOWN_FUNCTION``).

Every transition of every instance goes to the store's lifecycle record under
the source's control id (``source:<fqfn>``, never shared with a function or
a sink of the same name); a death goes there with its cause, as fatal when
the source raised it (DESIGN.md 2.3: connector exceptions are fatal) and as a
failure when sparkfn's own part failed or the source lost its broker (origin
``failure``: a ``BrokerUnreachableError`` from a source method).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from sparkfn.api.connector import Source
from sparkfn.api.lifecycle import DeathCause, RunState, StopMode
from sparkfn.api.status import DeathException, SourceInstanceStatus, SourceStatus
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.runner import SourceRunner, SourceState, SourceStats
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.states import FINAL_STATES, IllegalTransition
from sparkfn.runtime.lifecycle.target import Ended
from sparkfn.store.store import Store

# The cause recorded when every instance ended by itself: the input ended (a drain).
INPUT_ENDED = "the input ended"

# The stored states a runner's own report of its start or open may move on from.
_OPENING = frozenset({RunState.CREATED, RunState.STARTING, RunState.RESTARTING})
# (instance_id, old state, new state, cause)
GroupTransitionHook = Callable[[int, str, str, str], None]
logger = logging.getLogger("sparkfn.connectors")


class SourceInstances:
    """``config.parallelism`` :class:`SourceRunner` objects, instance ids ``0 .. P-1``.

    ``factory(instance_id)`` builds each instance's source object; by default
    it is loaded from the config. Used alone, :meth:`start` records the run
    and the group's state; under a supervisor (``supervised``), the
    supervisor records the run's state and the group only its instances'.
    """

    kind = "source"
    restarts_whole = False  # a replaced instance restarts alone

    def __init__(
        self,
        config: SourceConfig,
        store: Store,
        *,
        factory: Callable[[int], Source] | None = None,
        on_transition: GroupTransitionHook | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.name = config.fqn
        self.parallelism = config.parallelism
        self.control_id = control.control_id("source", config.fqn)
        self.supervised = False
        self._hook = on_transition
        # Runner threads record their transitions one at a time: the group's
        # state is worked out and written together, so the last write is of
        # the last state (two threads could write theirs in the wrong order).
        self._recording = threading.Lock()
        self._factory = factory
        self._past = SourceStats()  # what replaced runners did
        # Called when a runner's thread is done (its supervisor looks again).
        self.on_end: Callable[[], None] | None = None
        self.runners = [self._runner(i, 0) for i in range(config.parallelism)]

    def _runner(self, instance_id: int, epoch: int) -> SourceRunner:
        runner = SourceRunner(
            self.config,
            self.store,
            instance_id,
            factory=_bind(self._factory, instance_id),
            epoch=epoch,
        )
        runner.on_transition = lambda old, new, cause: self._record(runner, old, new, cause)
        runner.on_done = self._ended
        return runner

    def _ended(self) -> None:
        if self.on_end is not None:
            self.on_end()

    def start(self) -> None:
        """Record the run in the store (as functions' are) and start every instance."""
        epoch = control.begin_run(
            self.store, self.control_id, "source", self.parallelism, "started"
        )
        for runner in self.runners:
            runner.epoch = epoch
            runner.start()

    def _record(self, runner: SourceRunner, old: str, new: str, cause: str) -> None:
        """Every transition goes to the store's lifecycle record, deaths with their cause."""
        instance_id = runner.instance_id
        try:
            with self._recording:
                death = runner.death if new == RunState.ERROR else None
                if death is not None:
                    fatal = death.origin != "failure"  # the source's own exceptions are fatal
                    control.record_death(
                        self.store,
                        self.control_id,
                        instance_id,
                        death,
                        fatal=fatal,
                        epoch=runner.epoch,
                    )
                else:
                    # A runner reports late: what its supervisor recorded since stays.
                    # An end does not overwrite an end (a shutdown of every instance);
                    # a start or an open does not undo a start recorded by whoever
                    # started it (begin_run, revive), a stop or a shutdown.
                    ending = new == RunState.STOPPING or RunState(new).final
                    moves = control.set_state(
                        self.store,
                        self.control_id,
                        new,
                        cause,
                        [instance_id],
                        keep_ended=ending,
                        only_from=None if ending else _OPENING,
                    )
                    if moves.kept:  # the record is ahead of this report: it stays, said once here
                        logger.debug(
                            "source %s instance %d: %s -> %s not recorded: the record is %s",
                            self.name,
                            instance_id,
                            old,
                            new,
                            moves.kept[instance_id],
                        )
                if not self.supervised:
                    control.set_state(self.store, self.control_id, self.state, cause)
        except IllegalTransition:
            raise  # a defect of sparkfn's, for the runner's mover to see (SourceRunner)
        except Exception:
            logger.exception("source %s: recording %s -> %s failed", self.name, old, new)
        if self._hook is not None:
            self._hook(instance_id, old, new, cause)

    # --- the supervisor's run target ------------------------------------------------
    def launch(self, epoch: int, instances: list[int]) -> None:
        """Start these instances in ``epoch``; a runner that already ran is replaced."""
        for i in instances:
            runner = self.runners[i]
            if runner.state is not SourceState.CREATED:
                self._add_past(runner.stats)
                runner = self.runners[i] = self._runner(i, epoch)
            runner.epoch = epoch
            runner.start()

    def stop_point(self, mode: StopMode) -> None:
        """Sources stop where they are: nothing to take in advance."""

    def begin_stop(self, mode: StopMode, point: Any, cause: str) -> bool:
        """Ask every instance to drain or suspend."""
        self.stop(mode, cause)
        return True

    def stopped(self, record: control.RunControl) -> bool:
        """Every instance ended (``close()`` returned or the instance died) and its
        final transition is recorded, a death included (as :meth:`finished`): a
        death in ``prepare_to_shutdown()`` seen a moment early ended a drain
        ``STOPPED``, its death recorded after the run's end."""
        return all(runner.wait(0) for runner in self.runners)

    def cancel(self, cause: str, epoch: int) -> None:
        """Ask every instance to stop now."""
        self.stop(StopMode.CANCEL, cause)

    def halt(self) -> None:
        """Nothing: a dead instance's runner closes its source itself; the others run on."""

    def retire(self, instances: list[int]) -> None:
        """Stop these instances now; the others keep running."""
        for i in instances:
            self.runners[i].stop(StopMode.CANCEL, "shut down")

    def reached(self, point: Any) -> bool:
        """A source instance drains what its source gives until it ends: nothing to wait for."""
        return True

    def begin_leave(self, instance: int, mode: StopMode) -> None:
        """Ask the instance's runner to drain or suspend (it records its own end)."""
        self.runners[instance].stop(mode, f"{mode.value} requested by user")

    def left(self, instance: int, batch: Any) -> bool:
        """The instance's runner ended (its source's ``close()`` returned)."""
        return self.runners[instance].wait(0)

    def tend(self) -> bool:
        """Nothing: a source's instances are never parked."""
        return False

    def finished(self) -> Ended | None:
        """Every instance ended by itself (the end of its input): the run is drained.

        An instance counts once its final transition is recorded, a death
        included: a runner's state is final a moment before its death is in
        the store, and a supervisor looking then must not take it for a drain.
        """
        done = all(runner.wait(0) for runner in self.runners)
        return Ended(StopMode.DRAIN, INPUT_ENDED) if done else None

    def close(
        self, instances: list[int], *, graceful: bool, epoch: int, timeout: float
    ) -> list[str]:
        """Wait for these instances' ``close()``; names the ones still in a source call."""
        deadline = time.monotonic() + timeout
        unclosed = []
        for i in instances:
            runner = self.runners[i]
            if not runner.wait(max(0.0, deadline - time.monotonic())):
                unclosed.append(f"instance {i} in {runner.in_call or 'its loop'}()")
        return unclosed

    def stop(self, mode: str | StopMode = StopMode.DRAIN, cause: str = "") -> None:
        """Ask every instance to stop (any thread, any number of times)."""
        for runner in self.runners:
            runner.stop(mode, cause)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every instance ended; ``False`` on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for runner in self.runners:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not runner.wait(left):
                return False
        return True

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every runner thread; ``False`` (and a warning) for one still in a call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        ok = True
        for runner in self.runners:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ok = runner.join(left) and ok
        return ok

    @property
    def ended(self) -> bool:
        """Whether every instance is in a final state."""
        return all(r.state in FINAL_STATES for r in self.runners)

    @property
    def state(self) -> SourceState:
        """The source's state from its instances'.

        ``ERROR`` if any died; once all ended, ``SUSPENDED`` if all were
        suspended, else ``STOPPED``; otherwise ``RUNNING`` while any runs, else
        the first of ``STOPPING``, ``STARTING``, ``CREATED`` that any is in.
        ``RUNNING`` comes first so that one instance's end (a bounded source
        done before the others) does not move the run to ``STOPPING`` and
        back, which the state machine refuses; for the same reason an instance
        still being started while another one has ended already counts as
        running (the instances start one after the other, and the first may be
        done before the last starts).
        """
        states = [r.state for r in self.runners]
        if SourceState.ERROR in states:
            return SourceState.ERROR
        if all(s in FINAL_STATES for s in states):
            if all(s is SourceState.SUSPENDED for s in states):
                return SourceState.SUSPENDED
            return SourceState.STOPPED
        starting = {SourceState.CREATED, SourceState.STARTING}
        ended = any(s is SourceState.STOPPING or s in FINAL_STATES for s in states)
        if ended and any(s in starting for s in states):
            return SourceState.RUNNING
        for state in (SourceState.RUNNING, SourceState.STOPPING, SourceState.STARTING):
            if state in states:
                return state
        return SourceState.CREATED

    @property
    def deaths(self) -> dict[int, DeathCause]:
        """The instances that died, and why."""
        return {r.instance_id: r.death for r in self.runners if r.death is not None}

    def _add_past(self, s: SourceStats) -> None:
        self._past = _summed([self._past, s])

    @property
    def stats(self) -> SourceStats:
        """The instances' counters, summed (replaced runners' included)."""
        return _summed([self._past, *(r.stats for r in self.runners)])

    def status(
        self,
        *,
        state: RunState | None = None,
        restarts: Mapping[int, int] | None = None,
        unclosed: Sequence[str] = (),
    ) -> SourceStatus:
        """The source's state and each instance's.

        A supervised run passes what its lifecycle record holds: the
        recorded ``state`` (default: the instances' :attr:`state`), each
        instance's ``restarts`` and the objects a stop left ``unclosed``.
        """
        return SourceStatus(
            name=self.config.fqn,
            state=state or self.state,
            instances=[
                SourceInstanceStatus(
                    instance_id=r.instance_id,
                    state=r.state,
                    stats=r.stats.as_status(),
                    death_exception=DeathException.of(r.death),
                    num_restarts=(restarts or {}).get(r.instance_id, 0),
                )
                for r in self.runners
            ],
            unclosed_objects=list(unclosed),
        )


def _summed(parts: list[SourceStats]) -> SourceStats:
    total = SourceStats()
    counters = [f.name for f in fields(SourceStats) if f.type in (int, "int")]
    for s in parts:
        for name in counters:
            setattr(total, name, getattr(total, name) + getattr(s, name))
    return total


def _bind(factory: Callable[[int], Source] | None, instance_id: int) -> Callable[[], Source] | None:
    if factory is None:
        return None
    return lambda: factory(instance_id)
