"""A function's (or a sink's) supervisor: the one lifecycle over its Spark query.

:class:`FunctionSupervisor` is :class:`~sparkfn.runtime.lifecycle.supervisor.Supervisor`
running a :class:`~sparkfn.runtime.lifecycle.query_target.QueryTarget`; sources run
under the same supervisor with their instance threads as the target
(:mod:`sparkfn.connectors.source.source_run`). See :mod:`sparkfn.runtime.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkfn.api.errors import FunctionFailure
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.lookout import POLL_SECONDS
from sparkfn.runtime.lifecycle.parking import Parking
from sparkfn.runtime.lifecycle.poison import PoisonHunter
from sparkfn.runtime.lifecycle.policy import load_handler
from sparkfn.runtime.lifecycle.query_target import QueryTarget, StartQuery
from sparkfn.runtime.lifecycle.supervisor import Supervisor
from sparkfn.store.store import Store

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from sparkfn.runtime.lifecycle.poison import Probe

__all__ = ["POLL_SECONDS", "FunctionSupervisor", "MemberTarget", "StartQuery", "load_handler"]


# Makes the run target of a member of a query group, given a query target's
# arguments. The group (sparkfn.runtime.group) sits above the lifecycle, so the
# caller that put the run in a group passes it in: for example
# ``functools.partial(GroupMemberTarget, group, config)``.
MemberTarget = Callable[..., QueryTarget]


class FunctionSupervisor(Supervisor):
    """One function's (or sink's) run: its query, its stop modes and its failure policy.

    With ``park_idle_after`` (seconds), the query is parked after that long
    without input and started again when input arrives (:mod:`~sparkfn.runtime.lifecycle.parking`).
    With ``member``, the run has no query of its own: it is a member of a
    group's (:mod:`sparkfn.runtime.group`), and ``member`` makes its target.
    """

    def __init__(
        self,
        store: Store,
        config: FunctionConfig,
        start_query: StartQuery,
        inputs: Callable[[], list[str]],
        *,
        kind: str = "function",
        control_id: str | None = None,
        on_worker_shutdown: Callable[[FunctionFailure], None] | None = None,
        park_idle_after: float | None = None,
        member: MemberTarget | None = None,
    ) -> None:
        self.config = config
        cid = control_id or control.control_id(kind, config.fqfn)
        parking = (
            Parking(
                store,
                control_id=cid,
                subscription_name=config.subscription,
                inputs=inputs,
                after=park_idle_after,
                topics_pattern=config.topics_pattern,
                retry_topic=config.retry_topic if config.negative_acks else None,
            )
            if park_idle_after
            else None
        )
        # In a group, the run is a member of the group's query (never parked: idle, it costs nothing).
        target = QueryTarget if member is None else member
        self.query_target = target(
            store,
            kind=kind,
            name=config.fqfn,
            control_id=cid,
            parallelism=config.parallelism,
            start_query=start_query,
            inputs=inputs,
            parking=parking if member is None else None,
        )
        super().__init__(
            store,
            self.query_target,
            config.failure_policy,
            control_id=cid,
            py=config.py,
            on_worker_shutdown=on_worker_shutdown,
            # A function's or a sink's own query looks for a message that kills its
            # worker; a group's member is taken out to a query of its own first.
            hunter=PoisonHunter(store, config, cid)
            if member is None and kind in ("function", "sink")
            else None,
        )
        self.kind = kind
        self.query_target.on_end = self.wake
        self.query_target.subscription = config.subscription

    def take_probe(self) -> Probe | None:
        """The probe the query's next start runs, if the supervisor is hunting a poison message."""
        return self.hunter.take_probe() if self.hunter is not None else None

    @property
    def query(self) -> StreamingQuery | None:
        """The running ``StreamingQuery`` (the latest started)."""
        return self.query_target.query
