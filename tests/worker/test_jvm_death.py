"""A worker whose JVM dies comes back by itself: 20,000 messages, each out exactly once.

The worker runs in a process of its own (``worker_process``) with two
``effectively_once`` functions, one in the worker's query group and one with
a query of its own, and a ``file`` sink over the same input. While input
flows, its Spark JVM (a child process, the one the kernel's OOM killer would
pick) gets SIGKILL; the worker process lives on. It records each run's death
with the cause, starts a new session and every run again from its
subscription: every input ends up in the output exactly once per function;
the sink (at-least-once: a batch that flushed but did not commit is written
again) writes every input, the ones its subscription had committed at the
kill exactly once, and no line twice after keeping one per message id; the
death is in the lifecycle record, the restart is counted, and ``/health``
says what happened.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from brokers import wait_for
from worker_process import WorkerProcess, topic_counts

from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

ECHO = Path(__file__).resolve().parents[1] / "runtime" / "funcs" / "named_echo.py"
COUNT = 20_000
BASE = {
    "inputs": ["in"],
    "output": "out",
    "className": "named_echo.NamedEcho",
    "processingGuarantees": "EFFECTIVELY_ONCE",
    "subscriptionPosition": "Earliest",
}
# One member of the worker's query group, one query of its own.
FUNCTIONS = {"grouped": BASE, "alone": {**BASE, "dedicated": True}}
# A sink over the same input: each record a JSON line with its message id.
SINK = "public/default/arch"
SINK_ID = f"sink:{SINK}"  # its lifecycle record's id and its subscription's name


def sink_lines(folder: Path) -> list[tuple[str, str]]:
    """Every ``(message id, value)`` line the sink wrote, repeats included."""
    lines = []
    for path in folder.glob("arch-*.jsonl"):
        # A line the sink is writing now has no newline yet: it is read once it has.
        for line in path.read_text().split("\n")[:-1]:
            if line.strip():
                record = json.loads(line)
                lines.append((record["message_id"], record["value"]))
    return lines


def jvm_of(pid: int) -> int:
    """The pid of the java child of process ``pid``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and command.endswith(b"java"):
            return int(entry.name)
    pytest.fail(f"process {pid} has no java child")


def _running_in_epoch_after(store: Store, fqfn: str, epoch: int) -> bool:
    record = control.read_control(store, fqfn)
    return record is not None and record.epoch > epoch and record.state == control.RUNNING


@pytest.mark.long_running(150)
@pytest.mark.both_backends  # issue 39's acceptance: both stores
def test_a_worker_whose_jvm_is_killed_runs_every_function_again_and_loses_nothing(
    worker_process: WorkerProcess, store: Store, tmp_path: Path
) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", schema_type="string")
    sink = {
        "archive": "builtin://file",
        "inputs": ["in"],
        "sourceSubscriptionPosition": "Earliest",
        "configs": {"path": f"{tmp_path}/arch-{{instance}}.jsonl"},
    }
    with httpx.Client(base_url=worker_process.url, timeout=120) as client:
        made = client.post(f"/admin/v3/sinks/{SINK}", data={"sinkConfig": json.dumps(sink)})
        assert made.status_code == 200, made.text
    with worker_process.client() as client:
        for name, config in FUNCTIONS.items():
            with ECHO.open("rb") as code:
                made = client.post(
                    f"/public/default/{name}",
                    data={"functionConfig": json.dumps(config)},
                    files={"data": (ECHO.name, code, "text/x-python")},
                )
            assert made.status_code == 200, made.text
    producer = Producer(store, "in")

    def feed() -> None:  # about 4,000 a second: the kill lands mid-stream
        for start in range(0, COUNT, 400):
            producer.send_batch([Message(f"m{i}".encode()) for i in range(start, start + 400)])
            time.sleep(0.1)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    in_id = admin.get("in").id

    def sink_committed() -> dict[str, int]:
        """The sink subscription's cursor of each partition of ``in``, keyed ``"<partition>:"``."""
        with store.read() as conn:
            found = subscription.cursors(conn, SINK_ID)
        return {f"{part}:": cursor for (topic, part), cursor in found.items() if topic == in_id}

    wait_for(
        lambda: (
            sum(topic_counts(store).values()) >= 2_000 and sum(sink_committed().values()) >= 1_000
        ),
        "the first outputs and the sink's first commits",
        120,
    )
    fqfns = [f"public/default/{name}" for name in FUNCTIONS]
    runs = [*fqfns, SINK_ID]
    epochs = {cid: control.read_control(store, cid).epoch for cid in runs}  # type: ignore[union-attr]
    assert worker_process.proc is not None
    os.kill(jvm_of(worker_process.proc.pid), signal.SIGKILL)
    killed = time.monotonic()
    committed = sink_committed()  # what the sink had committed when its JVM died
    assert sum(committed.values()) < COUNT, "the sink was done before the kill: proves nothing"
    wait_for(
        lambda: all(_running_in_epoch_after(store, c, epochs[c]) for c in runs),
        "every function and the sink RUNNING again",
        60,
        worker_process.log,
    )
    assert time.monotonic() - killed < 60
    feeder.join()

    expected = collections.Counter(f"{n}:m{i}" for n in FUNCTIONS for i in range(COUNT))

    def how_far() -> str:
        found = topic_counts(store)
        missing, repeated = expected - found, found - expected
        return f"every input once per function: missing {sorted(missing)[:5]}... ({len(missing)}), repeated {sorted(repeated)[:5]}"

    wait_for(lambda: topic_counts(store) == expected, how_far, 120, worker_process.log)
    every = {f"m{i}" for i in range(COUNT)}
    wait_for(
        lambda: {v for _, v in sink_lines(tmp_path)} == every,
        lambda: f"the sink wrote {len({v for _, v in sink_lines(tmp_path)})} of {COUNT} inputs",
        120,
        worker_process.log,
    )
    assert worker_process.proc.poll() is None  # the same worker process throughout
    lines = sink_lines(tmp_path)
    per_id: dict[str, set[str]] = collections.defaultdict(set)
    for message_id, value in lines:
        per_id[message_id].add(value)
    # One line per message id: every input once, each id always with its own value.
    assert len(per_id) == COUNT and all(len(v) == 1 for v in per_id.values())
    assert sorted(v for (v,) in per_id.values()) == sorted(every)
    # From its subscription: what it had committed at the kill was not written again;
    # only a batch in flight then (flushed, not committed) may be, once.
    written = collections.Counter(message_id for message_id, _ in lines)
    for message_id, times in written.items():
        part, offset = message_id.split(":")
        limit = 1 if int(offset) < committed.get(f"{part}:", 0) else 2
        assert times <= limit, (message_id, times, committed)
    for cid in runs:
        causes = [t["cause"] for t in control.transitions_of(store, cid) if t["to"] == "ERROR"]
        assert any("killed by SIGKILL" in c for c in causes), (cid, causes)
        kind, name = ("sinks", SINK) if cid == SINK_ID else ("functions", cid)
        status = httpx.get(f"{worker_process.url}/admin/v3/{kind}/{name}/status", timeout=30).json()
        assert status["numRunning"] == 1, status
        assert status["instances"][0]["status"]["numRestarts"] >= 1, status
    health = httpx.get(worker_process.url + "/health", timeout=30).json()
    assert health["sparkSession"] == "up"
    assert health["sparkRestarts"] == 1
    assert "killed by SIGKILL" in health["sparkLostCause"]


@pytest.mark.long_running(60)
@pytest.mark.backend("sqlite")
def test_a_worker_that_cannot_start_a_new_session_exits_non_zero(
    store_url: str, data_dir: Path, tmp_path: Path
) -> None:
    # Spark's launch scripts read SPARK_CONF_DIR/spark-env.sh at each JVM start: made
    # to fail once the first session runs, the next JVM cannot start.
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    worker = WorkerProcess(data_dir, store_url, env={"SPARK_CONF_DIR": str(conf)}).start()
    try:
        worker.wait_ready()  # the session is up
        (conf / "spark-env.sh").write_text("echo 'no JVM today' >&2\nexit 1\n")
        assert worker.proc is not None
        os.kill(jvm_of(worker.proc.pid), signal.SIGKILL)
        code = worker.proc.wait(120)
    finally:
        worker.stop(signal.SIGKILL)  # only if it is still there
    said = worker.output()
    assert code == 4, said
    last = said.strip().splitlines()[-1]
    assert last.startswith("error: the Spark JVM"), said
    assert "killed by SIGKILL" in last and "no new Spark session could start" in last, said
