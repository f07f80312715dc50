"""``--auto-ack false`` and ``--timeout-ms`` as Pulsar gives them (issue 38, point 2).

A Pulsar function that acknowledges a message only on its second delivery
(``context.ack``), created on the shared worker (both stores) with
``sparkfn functions create`` typed as a ``pulsar-admin functions create``:
Pulsar's flags, persistent:// names. Every call's output is published, the
ack timeout delivers an unacknowledged message again, and one never
acknowledged goes to the dead-letter topic after ``--max-message-retries``;
without it (Pulsar's default) it is delivered again after the timeout without end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_admin_cli import Sparkfn
from worker_process import SharedWorker

from sparkfn.runtime.function.rows import DLQ_ATTEMPTS, DLQ_EXCEPTION
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import until

pytestmark = pytest.mark.slow

ACKER = Path(__file__).resolve().parents[1] / "runtime" / "funcs" / "ack_on_redelivery.py"
FUNCS = Path(__file__).resolve().parent / "funcs"


def test_auto_ack_false_publishes_and_the_ack_timeout_redelivers(
    shared_worker: SharedWorker,
) -> None:
    store = shared_worker.store
    TopicAdmin(store).create("ack-in")
    Producer(store, "ack-in").send_batch([Message(b"m0"), Message(b"never")])
    cli = Sparkfn(shared_worker.url, shared_worker.data_dir)
    cli.ok(
        "functions", "create",
        "--tenant", "public", "--namespace", "default", "--name", "acker",
        "--py", str(ACKER), "--classname", "ack_on_redelivery.AckOnRedelivery",
        "--inputs", "persistent://public/default/ack-in",
        "--output", "persistent://public/default/ack-out",
        "--auto-ack", "false", "--timeout-ms", "10000", "--max-message-retries", "1",
        "--subs-position", "Earliest",
    )  # fmt: skip

    def read(topic: str) -> list[Message]:
        if not TopicAdmin(store).exists(topic):
            return []
        return list(Consumer(store, topic, initial_position="earliest").receive(1000))

    until(
        lambda: len(read("ack-out")) == 4 and len(read("public/default/acker-DLQ")) == 1,
        lambda: f"ack-out holds {len(read('ack-out'))} messages, not 4",
        180,
    )
    outputs = sorted(
        (o["input"], o["delivery"]) for o in (json.loads(m.value) for m in read("ack-out"))
    )
    assert outputs == [("m0", 1), ("m0", 2), ("never", 1), ("never", 2)]
    [dead] = read("public/default/acker-DLQ")
    assert dead.value == b"never"
    assert dead.properties[DLQ_EXCEPTION].startswith("NotAcknowledgedError: ")
    assert dead.properties[DLQ_ATTEMPTS] == "2"


def test_auto_ack_false_and_timeout_ms_alone_deliver_again_after_the_timeout_without_end(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    """What a Pulsar user types: ``--auto-ack false --timeout-ms``, no retry limit. Every
    call's output is published; a message left unacknowledged is delivered again once the
    ack timeout passed, without end and never dead-lettered; one acknowledged stops."""
    store = shared_worker.store
    timeout_ms = 3000
    log = tmp_path / "deliveries.log"
    TopicAdmin(store).create("ack2-in")
    Producer(store, "ack2-in").send_batch([Message(b"m0"), Message(b"never")])
    cli = Sparkfn(shared_worker.url, shared_worker.data_dir)
    one = ("--tenant", "public", "--namespace", "default", "--name", "acker2")
    cli.ok(
        "functions", "create", *one,
        "--py", str(FUNCS / "ack_second.py"), "--classname", "ack_second.AckSecond",
        "--inputs", "persistent://public/default/ack2-in",
        "--output", "persistent://public/default/ack2-out",
        "--auto-ack", "false", "--timeout-ms", str(timeout_ms), "--subs-position", "Earliest",
        "--user-config", json.dumps({"log": str(log)}),
    )  # fmt: skip

    def outputs() -> list[dict[str, Any]]:
        if not TopicAdmin(store).exists("ack2-out"):
            return []
        read = Consumer(store, "ack2-out", initial_position="earliest").receive(1000)
        return [json.loads(m.value) for m in read]

    def of(value: str) -> list[dict[str, Any]]:
        return sorted((o for o in outputs() if o["input"] == value), key=lambda o: o["delivery"])

    until(lambda: len(of("never")) >= 3, lambda: f"outputs {outputs()}", 180)
    never = of("never")
    assert [o["delivery"] for o in never] == list(range(1, len(never) + 1))
    for earlier, later in zip(never, never[1:], strict=False):
        assert later["t"] >= earlier["t"] + timeout_ms / 1000  # after the ack timeout
    assert [o["delivery"] for o in of("m0")] == [1, 2]  # acknowledged on its second: done
    assert not TopicAdmin(store).exists("public/default/acker2-DLQ")
    cli.ok("functions", "delete", *one)
