"""The assignment loop of a cluster worker, on a real PostgreSQL store and membership.

The run's start is the test's own callable (no Spark): what is tested is
what the loop does when a start of an assigned run fails.
"""

from __future__ import annotations

import threading

from sparkfn.config.function import FunctionConfig
from sparkfn.store.store import Store
from sparkfn.worker.assigned import Assigned, wanted
from sparkfn.worker.cluster.leader_loop import LeaderLoop
from sparkfn.worker.cluster.membership import Membership
from sparkfn.worker.registry import HostedConfig, Registry
from sparkfn.worker.runs import Runs
from sparkfn.worker.settings import WorkerSettings
from waiting import until

FQFN = "public/default/flaky"


def _no_spark() -> None:
    raise AssertionError("the loop started Spark")


def test_an_assigned_run_whose_start_failed_is_started_at_a_later_round(pg_store: Store) -> None:
    """A start that fails (the store failed, or the worker was out of its cluster at that
    moment) was recorded as done in its epoch, and the run stayed unstarted for good: a
    function assigned to a live worker that never ran. Now it is tried again, backing off."""
    config = FunctionConfig.build(name="flaky", py="f.py", inputs=["in"], output="out")
    Registry(pg_store, FunctionConfig).create(config, package_digest=None, who="test")
    member = Membership(pg_store, "w", host="h", port=1, lease=1.5)
    member.start()
    tries: list[str] = []

    def start(config: HostedConfig) -> bool:
        tries.append(config.fqfn if isinstance(config, FunctionConfig) else "?")
        if len(tries) == 1:
            msg = "the store did not answer"
            raise RuntimeError(msg)
        return True

    runs = Runs(
        WorkerSettings(worker_id="w", store_url=pg_store.url, data_dir=pg_store.data_dir),
        open_store=lambda: pg_store,
        spark=_no_spark,  # type: ignore[arg-type]
        group_for=lambda _: None,
        on_worker_shutdown=lambda _: None,
    )
    assigned = Assigned(pg_store, runs, member, ready=threading.Event(), start=start)
    try:
        LeaderLoop(pg_store, member, lambda: wanted(pg_store)).round()  # placed on w
        assert assigned.round() == []  # the start failed
        assert assigned.round() == []  # backing off: not at once
        assert tries == [FQFN]
        until(lambda: assigned.round() == [FQFN], "the run started at a later round", 10)
        assert tries == [FQFN, FQFN]
        assert assigned.round() == []  # started: not again
        assert len(tries) == 2
    finally:
        member.close()
