"""A source and a sink hosted by the shared worker process (both stores), driven by the CLI.

``sparkfn sources|sinks ...`` run as a user runs them (each in a child
process, forked from one that imported the command, ``tests/cli/cli_forks.py``;
``SPARKFN_URL`` at the worker): a
generator source feeds a file sink through a topic; the sink is stopped,
started, drained, restarted and rescaled while the source runs; at the end
every message of the topic is in the sink's files (the file sink is
at-least-once: a line may repeat, none is missing).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from cli_forks import run_sparkfn
from worker_process import SharedWorker, topic_counts

from sparkfn.topics.admin import TopicAdmin
from waiting import WAIT, until

pytestmark = pytest.mark.slow
COUNTING = Path(__file__).resolve().parent / "funcs" / "counting_source.py"

Ran = subprocess.CompletedProcess[str]


# the shared bounded wait (tests/waiting.py), with this module's timeout
_until = partial(until, timeout=WAIT, every=0.2)


class Cli:
    """``sparkfn`` pointed at one worker."""

    def __init__(self, url: str) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
        self.env |= {"SPARKFN_URL": url, "COLUMNS": "200"}

    def run(self, *args: str, ok: bool = True) -> Ran:
        ran = run_sparkfn(args, self.env, WAIT)  # forked: tests/cli/cli_forks.py
        if ok:
            assert ran.returncode == 0, f"{args}: {ran.returncode}\n{ran.stdout}\n{ran.stderr}"
        return ran

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--output", "json").stdout)


def _written(directory: Path) -> set[str]:
    values = set()
    for path in directory.glob("arch-*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                values.add(json.loads(line)["value"])
    return values


def test_a_hosted_sink_fed_by_a_hosted_source_loses_nothing_across_its_lifecycle(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    TopicAdmin(shared_worker.store).create("out", schema_type="string")
    cli = Cli(shared_worker.url)
    made = cli.run(
        "sources", "create", "--name", "gen", "--source-type", "generator",
        "--destination-topic-name", "out", "--source-config", '{"rate": 200}',
        "--processing-guarantees", "effectively_once",
    )  # fmt: skip
    assert "created source public/default/gen (version 1)" in made.stdout
    files = tmp_path / "sink"
    cli.run(
        "sinks", "create", "--name", "arch", "--sink-type", "file", "--inputs", "out",
        "--subs-position", "Earliest",
        "--sink-config", f"path: {files}/arch-{{instance}}.jsonl",
    )  # fmt: skip
    _until(lambda: len(_written(files)) > 100, "the sink's first lines")
    status = cli.json("sinks", "status", "--name", "arch")
    assert (status["numInstances"], status["state"]) == (1, "RUNNING")
    assert status["instances"][0]["status"]["numWrittenToSink"] > 0

    # --no-wait says what it did: asked, not stopped (the stop after it waits, asking twice)
    said = cli.run("sinks", "stop", "--name", "arch", "--no-wait").stdout
    assert said == "asked sink public/default/arch to stop; not waiting (--no-wait)\n"
    for action, final in (("stop", "SUSPENDED"), ("drain", "STOPPED")):
        stopped = cli.json("sinks", action, "--name", "arch")
        assert stopped["action"] == action
        _until(
            lambda final=final: cli.json("sinks", "status", "--name", "arch")["state"] == final,
            action,
        )
        before = len(_written(files))
        time.sleep(2.0)
        assert len(_written(files)) == before  # a stopped sink writes nothing
        cli.run("sinks", "start", "--name", "arch")
        _until(lambda n=before: len(_written(files)) > n, f"lines after {action}")
    cli.run("sinks", "restart", "--name", "arch")
    updated = cli.json("sinks", "update", "--name", "arch", "--parallelism", "2")
    assert (updated["version"], updated["parallelism"], updated["inputs"]) == (
        2, 2, ["public/default/out"]
    )  # fmt: skip
    _until(lambda: cli.json("sinks", "status", "--name", "arch")["numRunning"] == 2, "2 instances")
    # One instance suspended alone: the other writes its share meanwhile; start brings it back.
    said = cli.run("sinks", "suspend", "--name", "arch", "--instance-id", "1").stdout
    assert said == "suspended instance 1 of sink public/default/arch\n"
    _until(lambda: cli.json("sinks", "status", "--name", "arch")["numRunning"] == 1, "1 left")
    one = cli.json("sinks", "status", "--name", "arch")["instances"][1]["status"]
    assert not one["running"], one
    before = len(_written(files))
    _until(lambda n=before: len(_written(files)) > n, "lines from instance 0 alone")
    cli.run("sinks", "start", "--name", "arch", "--instance-id", "1")
    _until(lambda: cli.json("sinks", "status", "--name", "arch")["numRunning"] == 2, "2 again")
    shown = cli.json("sinks", "get", "--name", "arch")
    assert (shown["archive"], shown["processingGuarantees"]) == ("builtin://file", "ATLEAST_ONCE")
    assert cli.json("sinks", "list") == ["arch"]
    assert cli.json("sources", "list") == ["gen"]

    cli.run("sources", "drain", "--name", "gen")
    _until(lambda: cli.json("sources", "status", "--name", "gen")["state"] == "STOPPED", "drain")
    sent = set(topic_counts(shared_worker.store))
    assert max(topic_counts(shared_worker.store).values()) == 1  # effectively once
    _until(lambda: _written(files) >= sent, "every message in the sink's files")

    # A source's --output is its topic (Pulsar's --destination-topic-name): --output-format.
    ran = cli.run(
        "sources", "update", "--name", "gen", "--parallelism", "2", "--output-format", "json"
    )
    updated = json.loads(ran.stdout)
    assert (updated["version"], updated["parallelism"], updated["sourceType"]) == (
        2, 2, "generator"
    )  # fmt: skip
    assert cli.json("sources", "status", "--name", "gen")["state"] == "STOPPED"  # kept stopped
    TopicAdmin(shared_worker.store).create("other", schema_type="string")
    cli.run(
        "sources", "create", "--name", "mine", "--archive", str(COUNTING),
        "--classname", "counting_source.CountingSource", "--destination-topic-name", "other",
        "--source-config", "count: 5",
    )  # fmt: skip
    _until(lambda: len(topic_counts(shared_worker.store, "other")) == 5, "the package's 5")
    assert cli.json("sources", "get", "--name", "mine")["archive"].startswith("sha256:")
    cli.run("sources", "delete", "--name", "mine")

    missing = cli.run("sinks", "get", "--name", "nope", ok=False)
    assert missing.returncode == 1 and "error [sink_not_found]" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = cli.run("sources", "create", "--name", "x", "--source-type", "nope", "--output", "out",
                  ok=False)  # fmt: skip
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "nope" in bad.stderr
    available = cli.json("sources", "available")
    assert "generator" in {d["name"] for d in available}
    assert "deleted sink public/default/arch" in cli.run("sinks", "delete", "--name", "arch").stdout
    cli.run("sources", "delete", "--name", "gen")
    assert cli.json("sinks", "list") == []
