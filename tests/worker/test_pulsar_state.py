"""State as a Pulsar user reaches it, on the shared worker through the CLI (issue 38, point 9).

A Pulsar function (``funcs/state_words.py``) of parallelism 2 created from
Pulsar's function YAML, its input a partitioned topic made with
``topics create-partitioned-topic``, fed with pulsar-client's ``produce -m
"a,b"``, its state read and written with pulsar-admin's ``querystate -k`` and
``putstate -s``:

* counters incremented by both instances add up exactly once committed
  (Pulsar's counters are shared at once; sparkfn's commit with the batch that
  made them: docs/pulsar-migration.md);
* a value the function stored that is no UTF-8 is shown as Pulsar's
  ``byteValue`` (base64), where querystate was an HTTP 500;
* ``putstate`` with ``byteValue`` stores the bytes, not the base64 text: the
  function's ``get_state`` gives them back.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from test_admin_cli import Sparkfn
from worker_process import SharedWorker

from waiting import until

pytestmark = pytest.mark.slow

FUNCS = Path(__file__).resolve().parent / "funcs"
IN = "persistent://public/default/words-in"
OUT = "persistent://public/default/words-out"
TARGET = ("--tenant", "public", "--namespace", "default", "--name", "words")
SENTENCES = ["a b", "a c", "b a", "a", "c c a", "b"]


def _yaml(tmp: Path) -> Path:
    config = tmp / "words.yaml"
    config.write_text(
        "tenant: public\n"
        "namespace: default\n"
        "name: words\n"
        f"py: {FUNCS / 'state_words.py'}\n"
        "className: state_words.StateWords\n"
        f"inputs: [{IN}]\n"
        f"output: {OUT}\n"
        "parallelism: 2\n"
        "subscriptionPosition: Earliest\n"
    )
    return config


def test_counters_of_two_instances_binary_state_and_putstate_byte_value(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    cli = Sparkfn(shared_worker.url, shared_worker.data_dir)
    cli.env["SPARKFN_STORE_URL"] = shared_worker.process.store_url  # topics: the worker's store

    def state(key: str) -> dict[str, Any] | None:
        ran = cli.run("functions", "querystate", *TARGET, "-k", key)
        if ran.returncode != 0:
            assert "has no state under key" in ran.stderr, ran.stderr  # not yet
            return None
        assert ran.stdout.startswith("{\n  "), ran.stdout  # pulsar-admin's indented JSON
        return dict(json.loads(ran.stdout))

    cli.ok("topics", "create-partitioned-topic", IN, "-p", "2")
    cli.ok("functions", "create", "--function-config-file", str(_yaml(tmp_path)))
    cli.ok("topics", "produce", IN, "-m", ",".join(SENTENCES))

    # Both instances counted (one partition each); the totals are exact.
    words = " ".join(SENTENCES).split()
    expected = {word: words.count(word) for word in set(words)}

    def counted() -> dict[str, Any]:
        return {word: (state(word) or {}).get("numberValue") for word in expected}

    until(lambda: counted() == expected, lambda: f"counters {counted()}, not {expected}", 240)
    status = json.loads(cli.ok("functions", "status", *TARGET).stdout)
    processed = [i["status"]["numSuccessfullyProcessed"] for i in status["instances"]]
    assert len(processed) == 2 and min(processed) > 0 and sum(processed) == len(SENTENCES)

    # A value of the function's own that is no UTF-8: Pulsar's byteValue, base64.
    cli.ok("topics", "produce", IN, "-m", "put blob")
    until(lambda: state("blob") is not None, "the function to store blob", 240)
    blob = state("blob")
    assert blob is not None
    assert base64.b64decode(blob["byteValue"]) == b"\xff\x00\xfeblob"
    assert blob.get("stringValue") is None

    # putstate -s with byteValue stores the bytes: the function reads them back as bytes.
    given = b"\x00\x01\xffgiven"
    document = {"key": "given", "byteValue": base64.b64encode(given).decode()}
    cli.ok("functions", "putstate", *TARGET, "-s", json.dumps(document))
    stored = state("given")
    assert stored is not None and stored["byteValue"] == document["byteValue"], stored
    cli.ok("topics", "produce", IN, "-m", "get given")

    def outputs() -> list[str]:
        ran = cli.ok("topics", "consume", OUT, "--json", "--position", "earliest")
        return [json.loads(line)["value"] for line in ran.stdout.splitlines() if line]

    until(lambda: outputs() != [], lambda: f"outputs {outputs()}", 240)
    assert outputs() == [f"given bytes {base64.b64encode(given).decode()}"]
    cli.ok("functions", "delete", *TARGET)
