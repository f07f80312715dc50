"""A backlog many times the admission cap is processed in capped batches, with bounded memory.

The function's Python workers report their resident memory when their
object is created and their peak with every message; the backlog is 80 MB,
the cap 4 MB per batch, and ``key_shared`` (the path that sorts a task's
whole input in memory) is used, so without the cap one batch would hold it
all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

PROBE = Path(__file__).resolve().parents[1] / "funcs" / "rss_probe.py"
VALUE = 200 * 1024
COUNT = 400  # 80 MB
CAP = 4 * 1024 * 1024

pytestmark = [pytest.mark.slow, pytest.mark.long_running(50)]


def test_a_large_backlog_is_admitted_in_capped_batches_with_bounded_memory(
    spark: Any, data_dir: Path
) -> None:
    # Memory is the subject, not the store: SQLite only, to spare the suite's time.
    store = Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir)
    try:
        _run(spark, store)
    finally:
        store.close()


def _run(spark: Any, store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2)
    admin.create("out", partitions=1, schema_type="string")
    producer = Producer(store, "in")
    for first in range(0, COUNT, 20):
        producer.send_batch(
            [Message(bytes([i % 251]) * VALUE, key=f"k{i}") for i in range(first, first + 20)]
        )
    config = FunctionConfig.build(
        name="probe",
        py=str(PROBE),
        classname="rss_probe.RssProbe",
        inputs=["in"],
        output="out",
        subscription_type="key_shared",
        parallelism=2,
        subscription_position="earliest",
        max_bytes_per_batch=CAP,
    )
    with FunctionRun(config, store=store, spark=spark) as run:
        run.start(until_drained=True)
        assert run.wait(timeout=300), "the backlog was not processed within 300 s"
        rows = [p["numInputRows"] for p in run.query.recentProgress]

    reports = []
    consumer = Consumer(store, "out", initial_position="earliest")
    while batch := consumer.receive(max_messages=10_000):
        reports.extend(m.value.decode().split() for m in batch if m.value)
    assert len(reports) == COUNT  # every message processed
    per_batch = CAP // VALUE + 1
    assert max(rows) <= per_batch, rows
    assert sum(1 for r in rows if r) >= COUNT // per_batch
    growth_mb = (max(int(peak) for _, peak in reports) - min(int(i) for i, _ in reports)) / 1024
    assert growth_mb < COUNT * VALUE / 2**20 / 3, f"workers grew by {growth_mb:.0f} MB"
