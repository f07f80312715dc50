"""The runtime's side of the reader's admission interface.

The ``sparkfn`` reader of a supervised query builds a :class:`RunAdmission`
from its options (``admission``, ``controlId``) and asks it at every
trigger what it may admit; the answer comes from the run's control record
(:mod:`sparkfn.runtime.lifecycle.control`), which the supervisor writes.
"""

from __future__ import annotations

from sqlalchemy import Connection, select

from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics.spark.admission import PARK, AdmissionView


class RunAdmission:
    """Admission of one supervised run, read from its control record."""

    def __init__(self, store_url: str, data_dir: str, control_id: str) -> None:
        self.store_url = store_url
        self.data_dir = data_dir
        self.control_id = control_id

    def view(self, parallelism: int) -> AdmissionView | None:
        """The control record's stop request, live instances and pending deaths."""
        record = control.read_control(Store.cached(self.store_url, self.data_dir), self.control_id)
        if record is None:
            return None
        return AdmissionView(
            live=tuple(record.live(parallelism)),
            blocked=any(r.dead and not r.handled for r in record.instances.values()),
            # a parked run admits nothing, as the reader's interface says it
            stop_mode=PARK if record.state == control.PARKED else record.stop_mode,
            drain_target=record.drain_target,
            final_seq=record.final_seq,
        )

    def parked(self, conn: Connection) -> bool:
        """Whether the supervisor parked the run (read in the caller's transaction)."""
        query = select(control.runs.c.state).where(control.runs.c.fqfn == self.control_id)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()
        return conn.execute(query).scalar() == control.PARKED
