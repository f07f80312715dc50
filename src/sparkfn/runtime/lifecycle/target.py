"""What a :class:`~.supervisor.Supervisor` runs: the :class:`RunTarget` protocol.

A run target is the part of a run that differs between kinds: a function's
or a sink's Spark query (:class:`~.query.QueryTarget`), a source's instance
threads (:class:`~sparkfn.connectors.source.instances.SourceInstances`). The
supervisor decides when to launch, stop, retire and close; the target knows
how. :class:`Ended` is what a target reports when it stopped by itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sparkfn.api.lifecycle import StopMode
from sparkfn.runtime.lifecycle import control


@dataclass(frozen=True)
class Ended:
    """The target stopped by itself: ``error`` if it failed as a whole (a Spark error);
    ``lost`` if what it ran in is gone (its Spark JVM died: no restart in this session)."""

    mode: StopMode
    cause: str
    error: str | None = None
    lost: bool = False


class RunTarget(Protocol):
    """What a :class:`~.supervisor.Supervisor` runs. Every method is called on the
    supervisor's thread, except :meth:`stop_point` (on the thread that asks to stop)."""

    kind: str  # function, sink, source
    name: str  # the FQFN, for messages
    parallelism: int
    restarts_whole: bool  # a relaunch restarts every instance (a query), or only the revived

    def launch(self, epoch: int, instances: list[int]) -> None:
        """Start (again) in ``epoch``; ``instances`` are the ones to (re)start."""

    def stop_point(self, mode: StopMode) -> Any:
        """Where a graceful stop ends, taken when it is asked (drain: the input's ends)."""

    def begin_stop(self, mode: StopMode, point: Any, cause: str) -> bool:
        """Start a drain or suspend; ``False`` if nothing runs (the run ends now)."""

    def stopped(self, record: control.RunControl) -> bool:
        """Whether the graceful stop asked by :meth:`begin_stop` is complete."""

    def cancel(self, cause: str, epoch: int) -> None:
        """Stop now (what is in flight is abandoned)."""

    def halt(self) -> None:
        """An instance died: stop what must stop before its objects are closed."""

    def retire(self, instances: list[int]) -> None:
        """Stop these instances only; the others keep running."""

    def reached(self, point: Any) -> bool:
        """Whether one instance's drain may end: the input up to ``point`` (from
        :meth:`stop_point`) is processed."""

    def begin_leave(self, instance: int, mode: StopMode) -> Any:
        """One instance stops gracefully (it is ``STOPPING``): what :meth:`left` waits for."""

    def left(self, instance: int, batch: Any) -> bool:
        """Whether the instance is past its last batch, ``batch`` from :meth:`begin_leave`
        (its objects may then be closed gracefully)."""

    def tend(self) -> bool:
        """Called at the supervisor's looks while the run runs: ``True`` asks for a
        start again in the same epoch (a parked query whose input has news)."""

    def finished(self) -> Ended | None:
        """``None`` while the target runs."""

    def close(
        self, instances: list[int], *, graceful: bool, epoch: int, timeout: float
    ) -> list[str]:
        """Close the instances' objects within ``timeout`` s; names the ones that were not."""
