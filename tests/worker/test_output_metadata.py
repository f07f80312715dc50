"""Output metadata and partition names as Pulsar gives them (issue 38, points 6 and 7).

A Pulsar function on a partitioned input, created on the shared worker with
``sparkfn functions create`` typed as ``pulsar-admin functions create``, fed
with ``topics produce`` by Pulsar's partition names: each output carries
``__pfn_input_topic__`` (with ``-partition-N``) and ``__pfn_input_msg_id__``
and nothing else of its input (no key, no properties), and
``get_current_message_topic_name()`` ends in ``-partition-N``, as
Pulsar's Python runtime does.
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


def _cli(worker: SharedWorker) -> Sparkfn:
    """The CLI on the worker, its topics commands on the worker's store."""
    cli = Sparkfn(worker.url, worker.data_dir)
    cli.env["SPARKFN_STORE_URL"] = worker.process.store_url
    return cli


FUNCS = Path(__file__).resolve().parent / "funcs"
IN = "persistent://public/default/meta-in"
OUT = "persistent://public/default/meta-out"


def test_outputs_name_their_input_partition_and_carry_nothing_else(
    shared_worker: SharedWorker,
) -> None:
    cli = _cli(shared_worker)
    cli.ok("topics", "create-partitioned-topic", IN, "--partitions", "3")
    cli.ok(
        "functions", "create",
        "--tenant", "public", "--namespace", "default", "--name", "meta",
        "--py", str(FUNCS / "topic_name.py"), "--classname", "topic_name.TopicName",
        "--inputs", IN, "--output", OUT, "--subs-position", "Earliest",
    )  # fmt: skip
    for partition in range(3):
        cli.ok(
            "topics", "produce", f"{IN}-partition-{partition}", "-m", f"m{partition}",
            "-k", "the-key", "-p", "trace=t-1",
        )  # fmt: skip

    def outputs() -> list[dict[str, Any]]:
        ran = cli.ok("topics", "consume", OUT, "--json", "--position", "earliest")
        return [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]

    until(lambda: len(outputs()) == 3, lambda: f"meta-out holds {outputs()}", 240)
    seen = sorted(outputs(), key=lambda m: m["value"])
    for partition, message in enumerate(seen):
        name = f"{IN}-partition-{partition}"
        assert message["value"] == f"m{partition}|{name}"
        assert message["key"] is None
        assert message["properties"] == {
            "__pfn_input_topic__": name,
            "__pfn_input_msg_id__": f"{partition}:0",
        }
    cli.ok("functions", "delete", "--tenant", "public", "--namespace", "default", "--name", "meta")
