"""``localrun``'s progress counts this run's messages, and labels the totals of every run.

A function's statistics are kept in the store across runs; a second run
that had nothing to do must not say it received what the first one did.
Here, the arithmetic; the two runs of a real function are the drained-run
test of ``test_functions_cli.py`` (each run a JVM of its own, so one pair of
runs checks this and that test's other promises).
"""

from __future__ import annotations

import pytest

from sparkfn.api.lifecycle import RunState
from sparkfn.api.status import FunctionInstanceStatus, FunctionInstanceStatusData, FunctionStatus
from sparkfn.cli.progress import this_run


def _status(received: int, processed: int, latency: float) -> FunctionStatus:
    data = FunctionInstanceStatusData(
        state=RunState.RUNNING,
        num_received=received,
        num_successfully_processed=processed,
        num_user_exceptions=received - processed,
        average_latency=latency,
    )
    return FunctionStatus(
        name="public/default/f",
        num_instances=1,
        instances=[FunctionInstanceStatus(instance_id=0, status=data)],
    )


def test_this_runs_counts_are_the_status_less_the_earlier_runs() -> None:
    ours = this_run(_status(10, 8, 2.0), since=_status(4, 4, 1.0)).instances[0].status
    assert (ours.num_received, ours.num_successfully_processed, ours.num_user_exceptions) == (
        6,
        4,
        2,
    )
    assert ours.average_latency == pytest.approx((8 * 2.0 - 4 * 1.0) / 4)
    assert this_run(_status(4, 4, 1.0), since=None) == _status(4, 4, 1.0)
