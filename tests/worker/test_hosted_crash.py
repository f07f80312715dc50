"""A hosted source and sink survive a SIGKILL of their worker: 20,000 messages, none lost.

The worker runs in a process of its own (``worker_process``). A generator
source (``effectively_once``, 20,000 records) appends to a topic that a
file sink writes out; the worker and its JVM are killed while records flow,
then started again on the same store. The worker starts both again from its
registry; the generator resumes its sequence (the store drops what it had
appended), so the topic ends with every record exactly once, and the sink
(at-least-once) has written every one of them.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import pytest
from worker_process import WorkerProcess, topic_counts

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from waiting import WAIT, until

COUNT = 20_000


def _written(directory: Path) -> set[str]:
    values = set()
    for path in directory.glob("arch-*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                values.add(json.loads(line)["value"])
    return values


@pytest.mark.long_running(150)
def test_a_sigkilled_worker_restarts_its_source_and_sink_and_loses_nothing(
    worker_process: WorkerProcess, store: Store, tmp_path: Path
) -> None:
    TopicAdmin(store).create("out", partitions=2, schema_type="string")
    source = {
        "archive": "builtin://generator",
        "topicName": "out",
        "configs": {"count": COUNT, "rate": 1000},
        "processingGuarantees": "EFFECTIVELY_ONCE",
        "parallelism": 2,
    }
    sink = {
        "archive": "builtin://file",
        "inputs": ["out"],
        "sourceSubscriptionPosition": "Earliest",
    }
    sink["configs"] = {"path": f"{tmp_path}/arch-{{instance}}.jsonl"}
    # The sink first: its Spark query takes seconds to start, the source's threads none.
    with httpx.Client(base_url=worker_process.url, timeout=120) as client:
        made = client.post(
            "/admin/v3/sinks/public/default/arch", data={"sinkConfig": json.dumps(sink)}
        )
        assert made.status_code == 200, made.text
        made = client.post(
            "/admin/v3/sources/public/default/gen", data={"sourceConfig": json.dumps(source)}
        )
        assert made.status_code == 200, made.text
    until(
        lambda: sum(topic_counts(store).values()) >= COUNT // 4,
        f"the source to append {COUNT // 4} records",
        120,
        every=0.2,
    )
    worker_process.stop(signal.SIGKILL)  # mid-stream: records read, appended, not yet acked
    killed_at = sum(topic_counts(store).values())
    assert killed_at < COUNT, "the source finished before the kill; the test proves nothing"
    worker_process.start()  # no request after this: the worker starts both from its registry
    expected = {f"message-{i}" for i in range(COUNT)}
    found = topic_counts(store)

    def appended() -> bool:
        nonlocal found
        found = topic_counts(store)
        assert max(found.values()) == 1, "a record was appended twice"
        return set(found) == expected

    def missing() -> str:
        gone = expected - set(found)
        return f"every record appended; {len(gone)} missing: {sorted(gone)[:10]}"

    until(appended, missing, WAIT, every=0.5)
    assert max(topic_counts(store).values()) == 1

    def unwritten() -> str:
        gone = expected - _written(tmp_path)
        return f"the sink to write every record; {len(gone)} missing: {sorted(gone)[:5]}"

    until(lambda: _written(tmp_path) >= expected, unwritten, WAIT, every=0.5)
