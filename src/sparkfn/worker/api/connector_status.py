"""Pulsar's ``SourceStatus`` and ``SinkStatus`` JSON, made from what sparkfn records.

A source's status comes from its :class:`~sparkfn.api.status.SourceStatus`
(the instances' counters), a sink's from its query's
:class:`~sparkfn.api.status.FunctionStatus` (a sink runs as a function).
Pulsar's fields come first; sparkfn's own follow them in each instance's
``status``: ``state`` and ``deathException`` (as a function's status has
them) and, for a source, ``numAcked``, ``numDeduplicated`` and ``numDropped``.
Pulsar's ``lastReceivedTime`` is given for sinks (the last batch's time);
sparkfn does not record it for sources, which do not show it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from sparkfn.api.lifecycle import RunState
from sparkfn.api.status import (
    DeathException,
    ExceptionInformation,
    FunctionStatus,
    SourceStatus,
)


class _Shape(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class SourceInstanceStatusData(_Shape):
    """Pulsar's ``SourceInstanceStatusData``, with sparkfn's state and counters."""

    running: bool = False
    error: str = ""
    num_restarts: int = 0
    num_received_from_source: int = 0
    num_system_exceptions: int = 0
    latest_system_exceptions: list[ExceptionInformation] = []
    num_source_exceptions: int = 0
    latest_source_exceptions: list[ExceptionInformation] = []
    num_written: int = 0
    worker_id: str = ""
    state: RunState = RunState.CREATED
    death_exception: DeathException | None = None
    num_acked: int = 0
    num_deduplicated: int = 0
    num_dropped: int = 0


class SourceInstanceStatus(_Shape):
    """One instance of a source."""

    instance_id: int
    status: SourceInstanceStatusData


class PulsarSourceStatus(_Shape):
    """Pulsar's ``SourceStatus``: every instance, how many run; sparkfn's state too."""

    name: str
    state: RunState
    num_instances: int
    num_running: int
    instances: list[SourceInstanceStatus]
    unclosed_objects: list[str] = []


class SinkInstanceStatusData(_Shape):
    """Pulsar's ``SinkInstanceStatusData``, with sparkfn's state."""

    running: bool = False
    error: str = ""
    num_restarts: int = 0
    num_read_from_pulsar: int = 0
    num_system_exceptions: int = 0
    latest_system_exceptions: list[ExceptionInformation] = []
    num_sink_exceptions: int = 0
    latest_sink_exceptions: list[ExceptionInformation] = []
    num_written_to_sink: int = 0
    last_received_time: int = 0
    worker_id: str = ""
    state: RunState = RunState.CREATED
    death_exception: DeathException | None = None


class SinkInstanceStatus(_Shape):
    """One instance of a sink."""

    instance_id: int
    status: SinkInstanceStatusData


class PulsarSinkStatus(_Shape):
    """Pulsar's ``SinkStatus``: every instance, how many run; sparkfn's state too."""

    name: str
    state: RunState
    num_instances: int
    num_running: int
    instances: list[SinkInstanceStatus]
    unclosed_objects: list[str] = []


def source_status(status: SourceStatus, worker_id: str) -> PulsarSourceStatus:
    """Pulsar's shape of a source's status."""
    instances = []
    for item in status.instances:
        death = item.death_exception
        system = death is not None and death.origin == "failure"
        stats = item.stats
        instances.append(
            SourceInstanceStatus(
                instance_id=item.instance_id,
                status=SourceInstanceStatusData(
                    running=item.state is RunState.RUNNING,
                    error=f"{death.type}: {death.message}" if death is not None else "",
                    num_restarts=item.num_restarts,
                    num_received_from_source=stats.received,
                    num_system_exceptions=stats.errors if system else 0,
                    num_source_exceptions=0 if system else stats.errors,
                    num_written=stats.appended,
                    worker_id=worker_id,
                    state=item.state,
                    death_exception=death,
                    num_acked=stats.acked,
                    num_deduplicated=stats.deduplicated,
                    num_dropped=stats.dropped,
                ),
            )
        )
    return PulsarSourceStatus(
        name=status.name,
        state=status.state,
        num_instances=len(instances),
        num_running=sum(1 for i in instances if i.status.running),
        instances=instances,
        unclosed_objects=list(status.unclosed_objects),
    )


def sink_status(status: FunctionStatus) -> PulsarSinkStatus:
    """Pulsar's shape of a sink's status (its query's function status)."""
    instances = [
        SinkInstanceStatus(
            instance_id=item.instance_id,
            status=SinkInstanceStatusData(
                running=item.status.running,
                error=item.status.error,
                num_restarts=item.status.num_restarts,
                num_read_from_pulsar=item.status.num_received,
                num_system_exceptions=item.status.num_system_exceptions,
                latest_system_exceptions=list(item.status.latest_system_exceptions),
                num_sink_exceptions=item.status.num_user_exceptions,
                latest_sink_exceptions=list(item.status.latest_user_exceptions),
                num_written_to_sink=item.status.num_successfully_processed,
                last_received_time=item.status.last_invocation_time,
                worker_id=item.status.worker_id,
                state=item.status.state,
                death_exception=item.status.death_exception,
            ),
        )
        for item in status.instances
    ]
    return PulsarSinkStatus(
        name=status.name,
        state=status.state,
        num_instances=status.num_instances,
        num_running=status.num_running,
        instances=instances,
        unclosed_objects=list(status.unclosed_objects),
    )
