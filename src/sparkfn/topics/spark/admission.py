"""What a supervised query may admit: the interface between the reader and its supervisor.

The reader runs in Spark's driver-side Python runner, a process of its own,
so it cannot hold the supervisor object. It names an :class:`Admission`
factory instead (reader option ``admission``, ``module:callable``, called as
``factory(store_url, data_dir, control_id)``), which the runtime provides.
``topics`` thereby never imports ``runtime``: the arrow points down.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Connection

from sparkfn.api.errors import ConfigError

# The stop mode of a parked run (sparkfn.runtime.lifecycle.parking): admit
# nothing, plan nothing, and no end-of-stream batch; the run goes on.
PARK = "park"


@dataclass(frozen=True)
class AdmissionView:
    """The supervisor's word on the next batch, read at every trigger.

    ``stop_mode`` is ``drain``, ``suspend``, ``cancel``, :data:`PARK` or ``None``;
    ``final_seq`` numbers the end-of-stream batches asked for so far.
    """

    live: tuple[int, ...]  # instances that take input now
    blocked: bool  # a death waits for the supervisor: start no batch
    stop_mode: str | None
    drain_target: dict[str, int] | None
    final_seq: int


class Admission(Protocol):
    """Answers, for one supervised query, what its source may admit now."""

    def view(self, parallelism: int) -> AdmissionView | None:
        """The current view; ``None`` when nothing supervises the query."""
        ...

    def parked(self, conn: Connection) -> bool:
        """Inside the transaction that plans a batch: whether the run is parked.

        Read (and on PostgreSQL locked) in that transaction, so that parking,
        which checks that no batch is planned, and planning, which plans
        nothing once parked, are ordered.
        """
        ...


AdmissionFactory = Callable[[str, str, str], Admission]


def load_admission(spec: str, store_url: str, data_dir: str, control_id: str) -> Admission:
    """Import ``module:callable`` and build the query's :class:`Admission`."""
    module_name, _, attr = spec.partition(":")
    try:
        factory: AdmissionFactory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        msg = f"sparkfn data source option admission {spec!r} cannot be loaded: {exc}"
        raise ConfigError(msg) from exc
    return factory(store_url, data_dir, control_id)
