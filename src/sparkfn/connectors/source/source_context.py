"""What a source instance is given and what it counts.

:class:`InstanceContext` is the context a
:class:`~sparkfn.connectors.source.runner.SourceRunner` hands its source: names,
``configs``, secrets, user metrics, ``fatal`` and, for push sources,
``emit``; every call goes to the runner, which is safe from any thread.
:func:`source_state_dir` is the directory built-ins keep their progress in.
:class:`SourceStats` counts what the instance did, for its status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkfn.api.connector import Record, SourceContext
from sparkfn.api.status import SourceInstanceStats
from sparkfn.config.connector import SourceConfig

if TYPE_CHECKING:
    from sparkfn.connectors.source.runner import SourceRunner


class InstanceContext(SourceContext):
    """The :class:`SourceContext` a runner gives its source.

    ``state_dir`` is a directory private to the source (not to the instance)
    under the data directory, where built-ins keep their progress.
    """

    def __init__(self, runner: SourceRunner, state_dir: Path) -> None:
        self._runner = runner
        self.state_dir = state_dir
        config = runner.config
        self._logger = logging.getLogger(f"sparkfn.source.{config.fqn}")

    def get_name(self) -> str:
        """The source's name."""
        return self._runner.config.name

    def get_tenant(self) -> str:
        """The source's tenant."""
        return self._runner.config.tenant

    def get_namespace(self) -> str:
        """The source's namespace."""
        return self._runner.config.namespace

    def get_instance_id(self) -> int:
        """This instance's id."""
        return self._runner.instance_id

    def get_num_instances(self) -> int:
        """The source's parallelism."""
        return self._runner.config.parallelism

    def get_logger(self) -> logging.Logger:
        """A logger named ``sparkfn.source.<tenant/namespace/name>``."""
        return self._logger

    def get_secret(self, secret_name: str) -> str | None:
        """A secret from ``secrets``: ``env:VAR``/``VAR`` or ``file:PATH#key``."""
        spec = self._runner.config.secrets.get(secret_name)
        if spec is None:
            return None
        from sparkfn.runtime.function.secrets import resolve_secret

        return resolve_secret(spec)

    def get_user_config_map(self) -> Mapping[str, Any]:
        """The source's ``configs``."""
        return self._runner.config.configs

    def record_metric(self, metric_name: str, metric_value: float) -> None:
        """Add an observation to a user metric (count and sum are kept)."""
        self._runner.record_metric(metric_name, metric_value)

    def fatal(self, exc: BaseException) -> None:
        """Terminate the instance with ``exc``; on the runner's own thread this raises."""
        self._runner.fatal(exc)

    def get_output_topic(self) -> str:
        """The source's output topic."""
        return self._runner.config.output

    def emit(self, record: Record) -> None:
        """Queue ``record`` for appending (any thread; may block while the queue is full)."""
        self._runner.emit(record)

    @property
    def state_id(self) -> str:
        """The key space of the source's state in the store: ``source:<tenant/namespace/name>``."""
        return f"source:{self._runner.config.fqn}"

    def get_state(self, key: str) -> bytes | None:
        """A committed value of the source's state (shared by its instances), or ``None``."""
        from sparkfn.state.store import get_state

        found = get_state(self._runner.store, self.state_id, key)
        return found.value if found is not None else None

    def put_state(self, key: str, value: str | bytes) -> None:
        """Store ``value`` under ``key`` in the source's state; committed when this returns."""
        from sparkfn.state.store import put_state

        data = value.encode() if isinstance(value, str) else bytes(value)
        put_state(self._runner.store, self.state_id, key, value=data)


def source_state_dir(data_dir: Path, config: SourceConfig) -> Path:
    """``<data dir>/sources/<tenant>/<namespace>/<name>``: a source's own files."""
    return data_dir / "sources" / config.tenant / config.namespace / config.name


@dataclass
class SourceStats:
    """What an instance did so far. Updated by the runner; read from any thread."""

    received: int = 0  # records read or emitted
    appended: int = 0  # records the store appended
    deduplicated: int = 0  # records the store dropped as appended before (effectively_once)
    acked: int = 0  # ack() calls that returned
    commits: int = 0  # commit() calls that returned
    errors: int = 0  # exceptions from the source or fatal() (the first one kills it)
    dropped: int = 0  # records emitted after the instance stopped taking them
    metrics: dict[str, list[float]] = field(default_factory=dict)  # record_metric: [count, sum]

    def as_status(self) -> SourceInstanceStats:
        """The counters, as an instance's status shows them (the same names)."""
        return SourceInstanceStats.model_validate(self, from_attributes=True)
