"""Window functions as Pulsar's, on the shared worker through the CLI (issue 38, point 8).

An event-time window function over two input topics, created from a Pulsar
function config YAML: its watermark is the least across the topics and none
until both have data (a message far ahead on one topic neither fires a
window nor makes the other's messages late); a late message without
``lateDataTopic`` is dropped, and said so in the function's log and stats;
a message at the watermark is on time. And a time length slid by count,
given with Pulsar's flags.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_admin_cli import Sparkfn
from worker_process import SharedWorker

from waiting import until

pytestmark = pytest.mark.slow

WINDOWS = Path(__file__).resolve().parents[1] / "runtime" / "funcs" / "windows.py"
NS = "persistent://public/default"
DROPPED = "user_metric___late_messages_dropped___count"


def _cli(worker: SharedWorker) -> Sparkfn:
    cli = Sparkfn(worker.url, worker.data_dir)
    cli.env["SPARKFN_STORE_URL"] = worker.process.store_url
    return cli


def _values(cli: Sparkfn, topic: str) -> list[str]:
    ran = cli.ok("topics", "consume", topic, "--json", "--position", "earliest")
    return [json.loads(line)["value"] for line in ran.stdout.splitlines() if line]


def test_event_time_windows_over_two_topics(shared_worker: SharedWorker, tmp_path: Path) -> None:
    cli = _cli(shared_worker)
    for topic in ("win-a", "win-b", "win-out"):
        cli.ok("topics", "create", f"{NS}/{topic}", "--schema-type", "string")
    config = tmp_path / "windowed.yaml"
    config.write_text(
        f"""tenant: public
namespace: default
name: windowed
py: {WINDOWS}
className: windows.Joined
inputs: [{NS}/win-a, {NS}/win-b]
output: {NS}/win-out
subscriptionPosition: Earliest
windowConfig:
  windowLengthDurationMs: 10
  timestampExtractorClassName: windows.ValueTime
  watermarkEmitIntervalMs: 1
"""
    )
    cli.ok("functions", "create", "--function-config-file", str(config))
    target = ("--name", "windowed")

    def stats() -> dict[str, Any]:
        return dict(json.loads(cli.ok("functions", "stats", *target).stdout))

    # Far ahead on one topic: no watermark yet, so the other's old messages are on time.
    cli.ok("topics", "produce", f"{NS}/win-a", "-m", "35:a1")
    until(lambda: stats()["receivedTotal"] == 1, lambda: f"stats {stats()}", 240)
    cli.ok("topics", "produce", f"{NS}/win-b", "-m", "3:b1")
    cli.ok("topics", "produce", f"{NS}/win-b", "-m", "12:b2")
    # The watermark is min(35, 12) = 12: window (0, 10] fires with b1.
    until(lambda: _values(cli, f"{NS}/win-out") == ["3:b1|10"], "window (0, 10]", 240)

    # Behind the watermark: dropped, as Pulsar drops it, logged and counted.
    cli.ok("topics", "produce", f"{NS}/win-b", "-m", "5:late")
    until(lambda: stats()["userMetrics"].get(DROPPED) == 1.0, lambda: f"stats {stats()}", 240)
    logs = cli.ok("functions", "logs", *target).stdout
    assert "1 late message(s) dropped" in logs, logs

    # At the watermark (12): on time, in the window with b2, which fires at 22.
    cli.ok("topics", "produce", f"{NS}/win-b", "-m", "12:b3")
    cli.ok("topics", "produce", f"{NS}/win-b", "-m", "22:b4")
    until(
        lambda: _values(cli, f"{NS}/win-out") == ["3:b1|10", "12:b2,12:b3|20"],
        lambda: f"win-out holds {_values(cli, f'{NS}/win-out')}",
        240,
    )
    assert stats()["userMetrics"][DROPPED] == 1.0
    cli.ok("functions", "delete", *target)


def test_a_time_length_slides_by_count(shared_worker: SharedWorker) -> None:
    cli = _cli(shared_worker)
    for topic in ("slid-in", "slid-out"):
        cli.ok("topics", "create", f"{NS}/{topic}", "--schema-type", "string")
    cli.ok(
        "functions", "create", "--tenant", "public", "--namespace", "default", "--name", "slid",
        "--py", str(WINDOWS), "--classname", "windows.Joined",
        "--inputs", f"{NS}/slid-in", "--output", f"{NS}/slid-out",
        "--window-length-duration-ms", "600000", "--sliding-interval-count", "2",
        "--subs-position", "Earliest",
    )  # fmt: skip
    cli.ok("topics", "produce", f"{NS}/slid-in", "-m", "x,y,z")
    until(lambda: len(_values(cli, f"{NS}/slid-out")) == 1, "the first window", 240)
    [window] = _values(cli, f"{NS}/slid-out")
    assert window.startswith("x,y|"), window  # every second message, the last 10 minutes'
    cli.ok("functions", "delete", "--name", "slid")
