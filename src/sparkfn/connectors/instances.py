"""All instances of one source: ``parallelism`` runners, stopped together.

>>> group = SourceInstances(config, store)
>>> group.start()
>>> group.stop("drain")
>>> group.wait(timeout=30)
True
>>> group.state
<SourceState.STOPPED: 'STOPPED'>

Instances are independent: one that dies does not stop the others (what
follows a death is the failure policy's business: the supervisor's, or
``sparkfn sources localrun``, which cancels the rest).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sparkfn.api.connector import Source
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.runner import (
    FINAL_STATES,
    SourceRunner,
    SourceState,
    SourceStats,
    StopMode,
)
from sparkfn.runtime import control
from sparkfn.store.store import Store

# (instance_id, old state, new state, cause)
GroupTransitionHook = Callable[[int, str, str, str], None]
logger = logging.getLogger("sparkfn.connectors")


class SourceInstances:
    """``config.parallelism`` :class:`SourceRunner` objects, instance ids ``0 .. P-1``.

    ``factory(instance_id)`` builds each instance's source object; by default
    it is loaded from the config.
    """

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
        self._hook = on_transition
        self.runners = [
            SourceRunner(
                config,
                store,
                instance_id,
                factory=_bind(factory, instance_id),
                on_transition=_bind_hook(self._record, instance_id),
            )
            for instance_id in range(config.parallelism)
        ]

    def start(self) -> None:
        """Record the run in the store (as functions' are) and start every instance."""
        control.begin_run(self.store, self.config.fqn, "source", self.config.parallelism, "started")
        for runner in self.runners:
            runner.start()

    def _record(self, instance_id: int, old: str, new: str, cause: str) -> None:
        """Every transition goes to the store's lifecycle record, deaths with their cause."""
        fqn = self.config.fqn
        try:
            death = self.runners[instance_id].death if new == "ERROR" else None
            if death is not None:
                fatal = death.origin != "connector"
                control.record_death(self.store, fqn, instance_id, death, fatal=fatal, epoch=0)
            else:
                control.set_state(self.store, fqn, new, cause, [instance_id])
            whole = self.state.value
            control.set_state(self.store, fqn, whole, cause)
        except Exception:
            logger.exception("source %s: recording %s -> %s failed", fqn, old, new)
        if self._hook is not None:
            self._hook(instance_id, old, new, cause)

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
        suspended, else ``STOPPED``; otherwise the least advanced of
        ``STOPPING``, ``RUNNING``, ``STARTING``, ``CREATED`` that any is in.
        """
        states = [r.state for r in self.runners]
        if SourceState.ERROR in states:
            return SourceState.ERROR
        if all(s in FINAL_STATES for s in states):
            if all(s is SourceState.SUSPENDED for s in states):
                return SourceState.SUSPENDED
            return SourceState.STOPPED
        for state in (SourceState.STOPPING, SourceState.RUNNING, SourceState.STARTING):
            if state in states:
                return state
        return SourceState.CREATED

    @property
    def deaths(self) -> dict[int, DeathCause]:
        """The instances that died, and why."""
        return {r.instance_id: r.death for r in self.runners if r.death is not None}

    @property
    def stats(self) -> SourceStats:
        """The instances' counters, summed."""
        total = SourceStats()
        for runner in self.runners:
            s = runner.stats
            total.received += s.received
            total.appended += s.appended
            total.deduplicated += s.deduplicated
            total.acked += s.acked
            total.commits += s.commits
            total.errors += s.errors
            total.dropped += s.dropped
        return total

    def status(self) -> dict[str, Any]:
        """A JSON-friendly status: the source's state and each instance's."""
        return {
            "name": self.config.fqn,
            "state": self.state.value,
            "instances": [
                {
                    "instanceId": r.instance_id,
                    "state": r.state.value,
                    "stats": r.stats.as_dict(),
                    "deathException": None
                    if r.death is None
                    else {
                        "type": r.death.type,
                        "message": r.death.message,
                        "origin": r.death.origin,
                        "thread": r.death.thread,
                        "traceback": r.death.traceback,
                    },
                }
                for r in self.runners
            ],
        }


def _bind(factory: Callable[[int], Source] | None, instance_id: int) -> Callable[[], Source] | None:
    if factory is None:
        return None
    return lambda: factory(instance_id)


def _bind_hook(
    hook: GroupTransitionHook | None, instance_id: int
) -> Callable[[str, str, str], None] | None:
    if hook is None:
        return None
    return lambda old, new, cause: hook(instance_id, old, new, cause)
