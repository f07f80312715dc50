"""``sparkfn sources localrun`` as a user runs it: a real child process on a real store.

A few runs only (each is a cold interpreter start): SIGTERM drains and exits 0
with every generated record appended once; a source that dies exits 1 with
one error line naming the instance, the thread and the exception; a missing
output topic is created unless the store says not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from connector_probes import wait_until

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.autocreate import TopicCreation
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import SchemaType

RUN_TIMEOUT = 60.0


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
    env["SPARKFN_DATA_DIR"] = str(data_dir)
    env["COLUMNS"] = "200"
    return env


def _sparkfn(*args: str) -> list[str]:
    return [sys.executable, "-m", "sparkfn.cli.main", *args]


@pytest.mark.slow
def test_sigterm_drains_and_exits_0_with_every_record_appended_once(
    sqlite_store: Store, data_dir: Path
) -> None:
    TopicAdmin(sqlite_store).create("ticks", partitions=2, schema_type="string")
    proc = subprocess.Popen(
        _sparkfn(
            "sources", "localrun",
            "--source-type", "generator",
            "--name", "ticker",
            "--destination-topic-name", "ticks",
            "--source-config", '{"rate": 400, "value": "tick-{index}"}',
            "--parallelism", "2",
            "--batch-timeout", "20ms",
            "--json-status",
        ),
        env=_env(data_dir),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        consumer = Consumer(sqlite_store, "ticks", initial_position="earliest")
        seen: list[bytes | None] = []

        def some_appended() -> bool:
            assert proc.poll() is None, proc.communicate()[1].decode()
            seen.extend(m.value for m in consumer.receive(max_messages=10_000))
            return len(seen) >= 20

        wait_until(some_appended, "the first 20 records", timeout=RUN_TIMEOUT)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    errors = stderr.decode()
    assert proc.returncode == 0, errors
    assert "Traceback" not in errors
    assert "stopping source public/default/ticker: drain (SIGTERM)" in errors
    status = json.loads(stdout)
    assert status["state"] == "STOPPED"
    assert [i["state"] for i in status["instances"]] == ["STOPPED", "STOPPED"]

    values = [
        m.value
        for m in Consumer(sqlite_store, "ticks", initial_position="earliest").receive(100_000)
    ]
    appended = sum(i["stats"]["appended"] for i in status["instances"])
    assert len(values) == appended >= 20
    # Drained: each instance's records are there once, without a gap.
    indexes = sorted(int((v or b"").decode().removeprefix("tick-")) for v in values)
    assert len(set(indexes)) == len(indexes)
    for instance in (0, 1):
        mine = [i for i in indexes if i % 2 == instance]
        assert mine == list(range(instance, instance + 2 * len(mine), 2))


@pytest.mark.slow
def test_a_source_that_dies_exits_1_naming_the_instance_and_the_exception(
    sqlite_store: Store, data_dir: Path, tmp_path: Path
) -> None:
    TopicAdmin(sqlite_store).create("lines", schema_type="json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ok": 1}\n{oops}\n')
    config = tmp_path / "lines.yaml"
    config.write_text(f"name: lines\nsourceType: file\ntopicName: lines\nconfigs:\n  path: {bad}\n")
    done = subprocess.run(
        _sparkfn("sources", "localrun", "--source-config-file", str(config)),
        env=_env(data_dir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    errors = done.stderr.decode()
    assert done.returncode == 1, errors
    assert "Traceback" not in errors
    last = errors.strip().splitlines()[-1]
    assert last.startswith(
        "error [connector_failed]: source public/default/lines: instance 0 died "
        "(connector, thread source-public/default/lines-0): ValueError: "
    ), errors
    assert f"{bad}:2: not valid JSON" in last


@pytest.mark.slow
def test_a_missing_output_topic_is_created_unless_the_store_says_not(
    sqlite_store: Store, data_dir: Path
) -> None:
    """As ``pulsar-admin sources localrun`` and sparkfn's functions: the topic is made on
    first use (the store's defaults); with creation off, one error line names it."""

    def localrun(topic: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            _sparkfn(
                "sources", "localrun", "--source-type", "generator", "--name", "five",
                "--destination-topic-name", topic, "--source-config", '{"count": 5}',
            ),
            env=_env(data_dir),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )  # fmt: skip

    TopicCreation.write(sqlite_store, schema_type="string")
    made = localrun("fresh")
    assert made.returncode == 0 and b"Traceback" not in made.stderr, made.stderr.decode()
    info = TopicAdmin(sqlite_store).get("fresh")
    assert (info.partitions, info.schema_type) == (1, SchemaType.STRING)
    values = Consumer(sqlite_store, "fresh", initial_position="earliest").receive(100)
    assert sorted(m.value for m in values) == [f"message-{i}".encode() for i in range(5)]

    TopicCreation.write(sqlite_store, enabled=False)
    refused = localrun("other")
    assert refused.returncode == 1, refused.stderr.decode()
    assert refused.stderr.decode() == (
        "error [invalid_config]: source public/default/five: topicName topic "
        "public/default/other does not exist; create it first (topics are not created on "
        "first use here)\n"
    )
    assert [str(t.name) for t in TopicAdmin(sqlite_store).list()] == ["public/default/fresh"]
