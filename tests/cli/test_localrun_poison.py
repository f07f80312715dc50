"""``functions localrun --until-drained`` over a message that kills its Python worker.

Issue 39, point 4: over ``a b exit c d`` (the function calls ``os._exit(3)``
on ``exit``) the drain's one batch crashes; the poison hunt splits it, passes
``exit`` to the dead-letter topic and drains on: 4 outputs, exit code 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Cli

from sparkfn.config.function import FunctionConfig

KILLER = str(Path(__file__).resolve().parents[1] / "runtime" / "funcs" / "worker_killer.py")
SPARK_RUN_TIMEOUT = 300.0  # a cold JVM on a loaded two-core machine, plus the hunt's starts


def _consume(cli: Cli, topic: str) -> list[dict[str, Any]]:
    result = cli.ok("topics", "consume", topic, "--json", "--position", "earliest")
    return [json.loads(line) for line in result.lines]


@pytest.mark.slow
@pytest.mark.long_running(90)
def test_until_drained_passes_a_message_that_kills_its_worker_and_exits_0(cli: Cli) -> None:
    for topic in ("in", "out"):
        cli.ok("topics", "create", topic, "--schema-type", "string")
    cli.ok("topics", "produce", "in", *(f"-m{v}" for v in ("a", "b", "exit", "c", "d")))
    args = [
        "--py", KILLER, "--classname", "worker_killer.WorkerKiller", "--name", "killer",
        "--inputs", "in", "--output", "out", "--subscription-position", "earliest",
        "--until-drained",
    ]  # fmt: skip
    done = cli.run("functions", "localrun", *args, timeout=SPARK_RUN_TIMEOUT)
    assert done.code == 0, done.stderr
    assert sorted(m["value"] for m in _consume(cli, "out")) == ["a!", "b!", "c!", "d!"]
    dlq = FunctionConfig.build(name="killer", py=KILLER, inputs=["in"]).default_dead_letter_topic
    (letter,) = _consume(cli, dlq)
    assert letter["value"] == "exit"
    assert letter["properties"]["EXCEPTION"].startswith(
        "PythonWorkerCrashed: Python worker exited with code 3 while processing message "
    ), letter
    assert "Traceback" not in done.stderr and "py4j" not in done.stderr.lower(), done.stderr
