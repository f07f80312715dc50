"""A PostgreSQL worker's part in its cluster: the leader's loop, the assignment's, the gate.

>>> membership, work = join_cluster(store, settings, runs, ready=restored, start=start)
>>> runs.start(config)   # a request's start: placed first, then run by its owner

Every start of a run goes through the gate (:meth:`ClusterWork.gate`):

* the assignment loop's own start of a run assigned here
  (:mod:`~sparkfn.worker.assigned`) goes on while this worker is a member
  and the run is still assigned here: it never refuses or stops anything;
* a request's start (a create, a start, a restart, an update) starts the run
  here when it is placed here. A run not placed yet, or assigned to a worker
  it leaves (a drained or departed one), is placed first: the leader is
  woken and waited for, up to :data:`PLACE_WAIT` rounds, and if no live
  worker has room the request is refused (503 ``no_worker_capacity``) and
  the run's desired state set back to stopped, so nothing starts later
  unasked. A run placed on another worker is its owner's to start.

A request's start that does not start the run here forgets the loop's note
that it started the run in this epoch: a restart that ended the run while
this worker was out of its cluster for a moment is started by the loop once
the worker is a member again, not left ended.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sparkfn.api.errors import NoWorkerCapacityError
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.instances import INPUT_ENDED
from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.worker.assigned import Assigned, wanted
from sparkfn.worker.cluster.leader_loop import LeaderLoop
from sparkfn.worker.cluster.members import owner, placed, room
from sparkfn.worker.cluster.membership import Membership
from sparkfn.worker.registry import Desired, HostedConfig, Registry
from sparkfn.worker.runs import Runs, key_kind
from sparkfn.worker.settings import WorkerSettings

log = logging.getLogger(__name__)

# How many leader rounds a start waits for its run to be placed.
PLACE_WAIT = 2


class ClusterWork:
    """A PostgreSQL worker's part in its cluster: the leader's loop (which plans only
    while this worker leads) and the loop that runs what is assigned to it."""

    def __init__(
        self,
        store: Store,
        runs: Runs,
        membership: Membership,
        *,
        ready: threading.Event,
        start: Callable[[HostedConfig], bool],
        handover_wait: float = 30.0,
    ) -> None:
        self.assigned = Assigned(
            store, runs, membership, ready=ready, start=start, handover_wait=handover_wait
        )
        self.leader = LeaderLoop(store, membership, lambda: wanted(store))
        self.runs = runs

    def start(self) -> None:
        """Gate the worker's starts by the assignment and start both loops."""
        self.runs.gate = self._gate
        self.runs.refuse_if_full = self.refuse_if_full
        self.runs.owner_of = self.owner_of
        self.leader.start()
        self.assigned.start()

    def _gate(self, key: str) -> bool:
        """Whether this worker may start run ``key`` now (the module docstring)."""
        assigned = self.assigned
        if assigned.own_start(key):  # the loop's: never refused, never stopped from here
            return assigned.owns(key)
        try:
            if (placed(assigned.store, key) is not None or self._place(key)) and assigned.owns(key):
                return True
        except BaseException:
            assigned.forget(key)
            raise
        assigned.forget(key)  # if it is (again) assigned here, the loop starts it
        return False

    def _place(self, key: str) -> bool:
        """Have run ``key`` placed on a worker that keeps it (it is assigned to nobody, or
        to a drained or departed worker): wake the leader (at once, if it is this worker)
        and wait up to a few rounds; True once placed. Still not placed and no live worker
        has room: refused (:meth:`refuse_if_full`) and its desired state set back to
        stopped, so that it does not start later unasked (a create that is refused
        registers nothing); with room, False: the leader places it later and its owner
        starts it."""
        store = self.assigned.store
        self.changed()
        deadline = time.monotonic() + PLACE_WAIT * self.leader.interval
        while placed(store, key) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if placed(store, key) is not None:
            return True
        try:
            self.refuse_if_full(key)
        except NoWorkerCapacityError:
            kind = key_kind(key)
            fqn = key.removeprefix(f"{kind}:")
            self.runs.registry_for(kind).set_desired(fqn, Desired.STOPPED)
            raise
        return False

    def refuse_if_full(self, key: str) -> None:
        """Raise :class:`~sparkfn.api.errors.NoWorkerCapacityError` (HTTP 503) when no live
        worker has room for run ``key``: the runs assigned to them that should run fill
        their capacity. A create asks first, before it keeps anything."""
        workers, capacity, used = room(self.assigned.store, placing=key)
        if used < capacity:
            return
        kind = key_kind(key)
        fqn = key.removeprefix(f"{kind}:")
        msg = (
            f"{kind} {fqn} was not started: no worker of the cluster has room for it "
            f"({workers} live worker(s), {used} run(s) assigned, capacity {capacity} in "
            "all); start it once a worker joins or has room (SPARKFN_WORKER_CAPACITY)"
        )
        raise NoWorkerCapacityError(msg)

    def owner_of(self, key: str) -> str | None:
        """The id of the worker assigned run ``key``, or None."""
        found = owner(self.assigned.store, key)
        return found[0] if found is not None else None

    def changed(self) -> None:
        """Something to place changed here (a create, a start, a stop): plan now if this
        worker leads, and look at its own assignment now."""
        self.leader.wake()
        self.assigned.wake()

    def restore(self) -> list[str]:
        """The worker's start, once Spark is up: plan now if this worker leads (a worker
        alone places everything on itself), then start what is assigned here; returns
        the keys started."""
        if self.leader.member.is_leader:
            self.leader.round()
        return self.assigned.round()

    def on_leader(self, leading: bool) -> None:
        """The membership's leader hook: a new leader plans at once."""
        if leading:
            self.leader.wake()

    def fenced(self) -> None:
        """The membership's fencing hook (its thread)."""
        log.error(
            "worker %s is out of its cluster: it starts nothing until it rejoins, then ends "
            "what was moved away (whose commits the newer run epochs refuse meanwhile)",
            self.assigned.worker_id,
        )
        self.assigned.fenced()

    def close(self) -> None:
        """Stop both loops (the worker stops its runs)."""
        self.leader.close()
        self.assigned.close()


def input_ended(store: Store, config: HostedConfig) -> bool:
    """Whether ``config`` is a bounded source whose last run read its input to the end (a
    drain of its own): it is recorded as stopped instead of being started to read it all
    again."""
    if not isinstance(config, SourceConfig):
        return False
    record = control.read_control(store, control.control_id("source", config.fqn))
    if record is None or record.state != control.STOPPED or record.cause != INPUT_ENDED:
        return False
    Registry(store, SourceConfig).set_desired(config.fqn, Desired.STOPPED)
    log.info("source %s read its input to the end before; not started again", config.fqn)
    return True


def join_cluster(
    store: Store,
    settings: WorkerSettings,
    runs: Runs,
    *,
    ready: threading.Event,
    start: Callable[[HostedConfig], bool],
) -> tuple[Membership, ClusterWork | None]:
    """Join ``store``'s cluster (:class:`~sparkfn.api.errors.ConfigError` if the id, or a
    SQLite store, is taken); on PostgreSQL, with the loops of :class:`ClusterWork`
    started. A SQLite store's one worker runs everything, as ever (no assignment)."""
    membership = Membership(
        store, settings.worker_id, host=settings.host, port=settings.port,
        capacity=settings.capacity, lease=settings.lease,
    )  # fmt: skip
    work = None
    if store.dialect == "postgresql":
        # A hand-over waits out the old owner's bounded stop (its mode, then a cancel).
        wait = 2 * settings.shutdown_timeout + settings.lease
        work = ClusterWork(store, runs, membership, ready=ready, start=start, handover_wait=wait)
        membership.on_fenced, membership.on_leader = work.fenced, work.on_leader
    membership.start()
    if work is not None:
        work.start()
    return membership, work
