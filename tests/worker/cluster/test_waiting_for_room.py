"""A departed worker's run that no live worker has room for waits, and its record says so."""

from __future__ import annotations

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.worker.assigned import wanted
from sparkfn.worker.cluster.leader_loop import LeaderLoop
from sparkfn.worker.cluster.members import owner
from sparkfn.worker.cluster.membership import Membership
from sparkfn.worker.registry import Registry
from waiting import until


def _record(store: Store, control_id: str) -> control.RunControl:
    found = control.read_control(store, control_id)
    assert found is not None
    return found


def test_a_departed_workers_run_no_worker_has_room_for_waits_and_says_so(
    pg_store: Store,
) -> None:
    """Its worker gone and the other full, the run is left unassigned; its record, which
    still said RUNNING (a killed worker records no end), is fenced and ends SUSPENDED with
    a cause that says it waits, so its status does not show it running."""
    registry = Registry(pg_store, FunctionConfig)
    keys = [f"public/default/{name}" for name in ("f", "g")]
    for name in ("f", "g"):
        config = FunctionConfig.build(name=name, py="f.py", inputs=["in"], output="out")
        registry.create(config, package_digest=None, who="test")
    a = Membership(pg_store, "a", host="h", port=1, capacity=1, lease=30)
    a.start()
    b = Membership(pg_store, "b", host="h", port=2, capacity=1, lease=30)
    try:
        until(lambda: a.is_leader, "a leads", 10)
        b.start()
        loop = LeaderLoop(pg_store, a, lambda: wanted(pg_store))
        loop.round()
        owners = {key: found[0] for key in keys if (found := owner(pg_store, key)) is not None}
        assert sorted(owners.values()) == ["a", "b"]
        on_a, on_b = sorted(keys, key=lambda key: owners[key])
        for key in keys:  # both run: their records say so
            control.begin_run(pg_store, key, "function", 2, "test")
            control.set_state(pg_store, key, control.RUNNING, "test", (control.FUNCTION, 0, 1))
        epoch = _record(pg_store, on_b).epoch
        b.close()  # b departs (as if killed: its run's record stays RUNNING); a is full
        loop.round()
        assert owner(pg_store, on_b) is None
        waits = _record(pg_store, on_b)
        assert (waits.state, waits.epoch) == (control.SUSPENDED, epoch + 1)
        assert "waiting for a worker: no live worker of the cluster has room" in waits.cause
        assert {i.state for i in waits.instances.values()} == {control.SUSPENDED}
        assert _record(pg_store, on_a).state == control.RUNNING  # a's run is untouched
        loop.round()  # once: it waits, unassigned, and is not fenced again
        assert _record(pg_store, on_b).epoch == epoch + 1
    finally:
        b.close()
        a.close()
