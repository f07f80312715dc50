"""A source run: its instances under the one supervisor and the source's failure policy.

>>> run = SourceRun(config, store)
>>> run.start()
>>> run.stop("drain")            # returns at once; the supervisor's thread stops it
>>> run.wait(timeout=30)
True
>>> run.state
<RunState.STOPPED: 'STOPPED'>

The instances are :class:`~sparkfn.connectors.source.instances.SourceInstances`'
runners; the supervisor is the one functions and sinks run under
(:class:`~sparkfn.runtime.lifecycle.supervisor.Supervisor`), so
``config.failure_policy`` applies as it does to them: a source's own
exceptions are fatal (``on_fatal``, default ``SHUTDOWN_FUNCTION``: every
instance is cancelled, ``ERROR``); ``REPLACE_INSTANCE`` starts a new runner
for the dead instance after a backoff; ``SHUTDOWN_INSTANCE`` leaves the
others running. The lifecycle record is kept under the source's control id
(``source:<fqfn>``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkfn.api.connector import Source
from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import RunState, StopMode
from sparkfn.api.status import SourceStatus
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.runner import SourceRunner, SourceStats
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.supervisor import Supervisor
from sparkfn.store.store import Store


class SourceRun:
    """One source's instances, supervised with the source's failure policy."""

    def __init__(
        self,
        config: SourceConfig,
        store: Store,
        *,
        factory: Callable[[int], Source] | None = None,
        on_worker_shutdown: Callable[[FunctionFailure], None] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.instances = SourceInstances(config, store, factory=factory)
        self.instances.supervised = True
        self.control_id = self.instances.control_id
        self.supervisor = Supervisor(
            store,
            self.instances,
            config.failure_policy,
            control_id=self.control_id,
            py=config.py,
            on_worker_shutdown=on_worker_shutdown,
        )
        # An instance's end (of its input, or its death) has the supervisor look at once.
        self.instances.on_end = self.supervisor.wake

    @property
    def runners(self) -> list[SourceRunner]:
        """The current runner of every instance."""
        return self.instances.runners

    @property
    def stats(self) -> SourceStats:
        """Every runner's counters, summed (replaced runners' included)."""
        return self.instances.stats

    def start(self) -> SourceRun:
        """Record the run and start every instance."""
        self.supervisor.start()
        return self

    def stop(self, mode: str | StopMode = StopMode.DRAIN, cause: str = "") -> bool:
        """Ask the run to stop (any thread, any number of times); returns at once."""
        return self.supervisor.stop(mode, cause=cause)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run ended; ``False`` on timeout."""
        return self.supervisor.wait(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the runner threads; ``False`` (and a warning) for one still in a call."""
        return self.instances.join(timeout)

    @property
    def state(self) -> RunState:
        """The source's state as recorded (``CREATED`` before the start)."""
        record = control.read_control(self.store, self.control_id)
        return RunState(record.state) if record is not None else RunState.CREATED

    def death(self) -> tuple[int, control.InstanceRecord] | None:
        """The first death of the run that ended it in ``ERROR``, if it did."""
        record = control.read_control(self.store, self.control_id)
        if record is None or record.state != RunState.ERROR:
            return None
        dead = [r for r in record.instances.values() if r.death is not None]
        if not dead:
            return None
        first = min(dead, key=lambda r: r.died_at.timestamp() if r.died_at else float("inf"))
        return first.instance_id, first

    def status(self) -> SourceStatus:
        """The source's recorded state, each instance's, and what a stop left unclosed."""
        record = control.read_control(self.store, self.control_id)
        if record is None:
            return self.instances.status(unclosed=self.supervisor.unclosed)
        return self.instances.status(
            state=RunState(record.state),
            restarts={i: r.restarts for i, r in record.instances.items()},
            unclosed=self.supervisor.unclosed,
        )

    def transitions(self) -> list[dict[str, Any]]:
        """Every recorded state transition of the source and its instances."""
        return control.transitions_of(self.store, self.control_id)
