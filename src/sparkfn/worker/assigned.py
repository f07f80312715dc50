"""A cluster worker runs exactly what the leader assigned to it.

>>> assigned = Assigned(store, runs, membership, ready=restored, start=start)
>>> runs.gate = assigned.owns        # simplest gate (ClusterWork's places a run first)
>>> assigned.start()                 # a thread: every round, start and stop runs to match

Every round (``lease / 3`` seconds, and at once when woken) the worker reads
its own assignment rows (control id and epoch) and the registry's desired
states, then

* ends (``suspend``) each run it hosts that is no longer assigned to it;
* starts each assigned run that should run and that it has not started in
  the assignment's epoch (a run that ended by itself in that epoch, in
  ``ERROR`` for instance, stays ended, as on a single worker); a run handed
  over from a live worker is started once that worker's run has ended
  (:mod:`~sparkfn.worker.cluster.handover`);
* starts again a run whose registry version changed, so an update received
  by any worker reaches the owner: the old version ends by the update's stop
  mode, which the registry keeps (``drain`` unless the update asked
  ``suspend``).

Fenced (its lease ran out: paused, partitioned, starved), the worker starts
nothing until it is a member again, then ends what is no longer assigned to
it. Its runs are not cancelled at the fence itself: the leader bumped the
run epoch of each run it moved away, so their commits are refused and their
supervisors stop on the newer epoch meanwhile, while a run still assigned to
it (a lapse too short for the leader to act on) goes on undisturbed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import select

from sparkfn.api.errors import NotFoundError
from sparkfn.api.lifecycle import StopMode
from sparkfn.store.registry_schema import functions
from sparkfn.store.store import Store
from sparkfn.worker.cluster.assignment_store import assignment_of, read_assignments
from sparkfn.worker.cluster.handover import Handover
from sparkfn.worker.cluster.membership import Membership, MemberState
from sparkfn.worker.registry import Desired, HostedConfig, desired_states
from sparkfn.worker.runs import Runs, ended, key_kind

log = logging.getLogger(__name__)

# Seconds the worker's shutdown waits for the loop's round (the runs' own stop is bounded).
CLOSE_WAIT = 5.0
# The version of a run a request started (the loop compares its config instead).
UNKNOWN_VERSION = -1
# Longest wait, in seconds, before an assigned run whose start failed is tried again.
RETRY_CAP = 30.0
# Seconds between rounds while a hand-over is waited for (its old run ending).
HANDOVER_POLL = 0.25


class Assigned:
    """The loop that keeps a cluster worker's runs equal to its assignment."""

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
        self.store = store
        self.runs = runs
        self.membership = membership
        self.worker_id = membership.worker_id
        self.ready = ready
        # Starts a run (False: it should not start, a source whose input ended; raises
        # when it could not start, and is tried again).
        self._start = start
        self.interval = membership.lease / 3
        # Runs handed over from a live worker wait for its run to end, up to handover_wait s.
        self.handover = Handover(store, deadline=handover_wait)
        # control id -> (assignment epoch, registry version) this worker started it in
        self.started: dict[str, tuple[int, int]] = {}
        # control id -> (failed starts in a row, monotonic time of the next try)
        self._retry: dict[str, tuple[int, float]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._round_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # The run this thread's loop is starting, if any (the gate lets it go on).
        self._own = threading.local()

    def owns(self, key: str) -> bool:
        """Whether run ``key`` (its registry key: its control id) is assigned to this
        worker now, read from the store (and the worker is a member)."""
        if self.membership.state is not MemberState.MEMBER:
            return False
        found = assignment_of(self.store, key)
        if found is None or found.worker_id != self.worker_id:
            return False
        # Started (by the caller) in this epoch: the loop keeps it, checking its version.
        self.started[key] = (found.epoch, UNKNOWN_VERSION)
        return True

    def own_start(self, key: str) -> bool:
        """Whether run ``key``'s start under way on this thread is the loop's own."""
        return bool(getattr(self._own, "key", None) == key)

    def forget(self, key: str) -> None:
        """Forget that run ``key`` was started in its epoch: a request ended it and did not
        start it here, so the loop starts it if it is (or is again) assigned here."""
        self.started.pop(key, None)

    def start(self) -> None:
        """Start the loop's thread."""
        self._thread = threading.Thread(
            target=self._loop, name=f"sparkfn-assigned-{self.worker_id}", daemon=True
        )
        self._thread.start()

    def wake(self) -> None:
        """Look at the assignment now rather than at the next round."""
        self._wake.set()

    def close(self) -> None:
        """Stop the loop (idempotent); the runs are the worker's to stop."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=CLOSE_WAIT)  # a start under way fails once runs close

    def fenced(self) -> None:
        """The membership's fencing hook: look again at once (the loop acts on nothing
        while the worker is out, and on its assignment once it has rejoined)."""
        self.wake()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(HANDOVER_POLL if self.handover.pending() else self.interval)
            self._wake.clear()
            if self._stop.is_set() or not self.ready.is_set() or self.runs.closing:
                continue
            try:
                self.round()
            except Exception:  # the store failed: the next round tries again
                log.exception("worker %s: its assignment round failed", self.worker_id)

    def round(self) -> list[str]:
        """Start and stop runs to match this worker's assignment (the module docstring);
        returns the keys of the runs it started."""
        with self._round_lock:
            if self.membership.state is not MemberState.MEMBER:
                return []  # out: start nothing; what was moved away is fenced by its epoch
            mine = {
                item.instance.control_id: item.epoch
                for item in read_assignments(self.store, self.worker_id)
            }
            for key in self.runs.running(None):
                if key not in mine:
                    log.info("worker %s: %s is no longer assigned to it", self.worker_id, key)
                    self.runs.end(key, StopMode.SUSPEND)
            for key in list(self.started):
                if key not in mine:
                    del self.started[key]
            for key in list(self._retry):
                if key not in mine:
                    del self._retry[key]
            self.handover.forget(set(mine))
            states = desired_states(self.store)
            return [
                key
                for key, epoch in sorted(mine.items())
                if key in states
                and not self._stop.is_set()
                and self._keep(key, epoch, *states[key])
            ]

    def _keep(self, key: str, epoch: int, version: int, desired: Desired) -> bool:
        """Start, or start again after an update, the assigned run ``key``; True if started.

        A start that fails (the store or Spark failed, the worker was out of its cluster
        for a moment) is tried again at later rounds, backing off up to
        :data:`RETRY_CAP` seconds: a run assigned here is never left unstarted for good."""
        failed, retry_at = self._retry.get(key, (0, 0.0))
        if time.monotonic() < retry_at:
            return False
        done = self.started.get(key)
        run = self.runs.get(key)
        running = run is not None and not ended(run)
        if done is None and running:  # started by a request here (create, start, restart)
            self.started[key] = (epoch, version)
            return False
        if done is not None and done[0] == epoch and (done[1] == version or not running):
            self.started[key] = (epoch, version)  # ended by itself or stopped: it stays so
            return False
        kind = key_kind(key)
        fqn = key.removeprefix(f"{kind}:")
        try:
            config = self.runs.registry_for(kind).get(fqn).config
        except NotFoundError:  # deleted meanwhile: the leader drops its assignment
            return False
        if done is not None and done[0] == epoch:  # a new version, updated at another worker
            if self.runs.runs_config(key, config):  # or here: it runs already
                self.started[key] = (epoch, version)
                return False
            mode = update_mode(self.store, key)
            log.info("worker %s: %s has a new version %d (%s)", self.worker_id, key, version, mode)
            self.runs.end(key, mode)
        elif running:  # started in another epoch: its run was fenced, or will be
            self.runs.end(key, StopMode.CANCEL)
        elif desired is Desired.RUNNING and self.handover.waits_for(key, epoch) is not None:
            return False  # its previous owner's run has not ended yet: a later round
        self.started[key] = (epoch, version)
        if desired is not Desired.RUNNING:
            return False
        try:
            self._own.key = key
            started = self._start(config)
        except Exception as exc:  # one broken run must not keep the others down
            del self.started[key]  # not started: the next try starts it
            wait = min(RETRY_CAP, self.interval * 2**failed)
            self._retry[key] = (failed + 1, time.monotonic() + wait)
            log.error(
                "worker %s: %s %s could not start (tried again in %.0f s): %s",
                self.worker_id, kind, fqn, wait, exc,
            )  # fmt: skip
            return False
        finally:
            self._own.key = None
        self._retry.pop(key, None)
        if started:
            log.info("worker %s runs %s (assignment epoch %d)", self.worker_id, key, epoch)
        return started


def update_mode(store: Store, key: str) -> StopMode:
    """How the version before run ``key``'s current one ends: the stop mode its update
    asked, kept in the registry (``drain`` if none was kept)."""
    with store.read() as conn:
        found = conn.execute(
            select(functions.c.update_mode).where(functions.c.fqfn == key)
        ).scalar_one_or_none()
    return StopMode(found) if found else StopMode.DRAIN


def wanted(store: Store) -> tuple[set[str], set[str]]:
    """What the leader places: the control ids whose desired state is running, and every
    registered control id (the others' assignments are deleted)."""
    states = desired_states(store)
    return {key for key, (_, desired) in states.items() if desired is Desired.RUNNING}, set(states)
