"""``localrun``'s progress counts this run's messages, and labels the totals of every run.

A function's statistics are kept in the store across runs; a second run
that had nothing to do must not say it received what the first one did.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_runner import Cli

from sparkfn.api.lifecycle import RunState
from sparkfn.api.status import FunctionInstanceStatus, FunctionInstanceStatusData, FunctionStatus
from sparkfn.cli.progress import this_run

EXCLAMATION = str(Path(__file__).resolve().parents[2] / "examples" / "exclamation.py")
SPARK_RUN_TIMEOUT = 240.0  # a cold JVM on a loaded two-core machine, plus the run


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


def _localrun(cli: Cli) -> list[str]:
    args = [
        "--py", EXCLAMATION, "--name", "counted", "--inputs", "in",
        "--subscription-position", "earliest", "--until-drained",
    ]  # fmt: skip
    done = subprocess.run(
        cli.command(["functions", "localrun", *args]),
        capture_output=True,
        text=True,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        timeout=SPARK_RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stderr.splitlines() if "public/default/counted STOPPED" in line]


@pytest.mark.slow
@pytest.mark.long_running(40)
def test_a_second_run_with_nothing_to_do_counts_nothing_and_labels_the_totals(cli: Cli) -> None:
    cli.ok("topics", "create", "in", "--schema-type", "string")
    cli.ok("topics", "produce", "in", "-m", "a", "-m", "b", "-m", "c", "-m", "d")

    first = _localrun(cli)[-1]
    assert "received 4, processed 4," in first and "totals" not in first, first

    second = _localrun(cli)[-1]
    assert "received 0, processed 0," in second, second
    assert second.endswith(
        "(this run; totals of every run: received 4, processed 4, user exceptions 0, "
        "system exceptions 0, dead-lettered 0)"
    ), second
