"""The sparkfn Spark data source on the real local Spark, on both store backends."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from spark_copy_child import start_copy
from topic_data import read_all as _read_all
from topic_data import stored_table
from topic_data import value_schema as _value_schema

from sparkfn.api.errors import ConfigError, TopicNotFoundError
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.log import stage
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark.commit import KILL_AFTER_COMMIT_ENV
from sparkfn.topics.spark.reader import SparkfnStreamReader
from sparkfn.topics.spark.source import spark_options
from sparkfn.topics.spark.writer import SparkfnStreamWriter, StagedBatch
from waiting import until

CHILD = Path(__file__).with_name("spark_copy_child.py")


def _fill(store: Store, topic: str, count: int, partitions: int = 3) -> list[bytes]:
    TopicAdmin(store).create(topic, partitions=partitions)
    values = [f"message-{i:06d}".encode() for i in range(count)]
    producer = Producer(store, topic)
    for first in range(0, count, 97):
        chunk = values[first : first + 97]
        producer.send_batch([Message(v, key=f"k{i % 13}") for i, v in enumerate(chunk, first)])
    return values


def _copy(spark: Any, store: Store, checkpoint: Path, **read_options: Any) -> Any:
    source = (
        spark.readStream.format("sparkfn")
        .options(**spark_options(store))
        .option("topic", "src")
        .option("startingOffsets", "earliest")
        .options(**read_options)
        .load()
    )
    query = (
        source.select("key", "value")
        .writeStream.format("sparkfn")
        .options(**spark_options(store))
        .option("topic", "dst")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the copy query did not finish within 120 s"
    return query


def test_copy_is_exact_and_keeps_keys(spark: Any, store: Store, data_dir: Path) -> None:
    values = _fill(store, "src", 1000)
    TopicAdmin(store).create("dst", partitions=2)
    _copy(spark, store, data_dir / "ck")
    assert collections.Counter(_read_all(store, "dst")) == collections.Counter(values)
    # Keys route by hash on the way out too: every key lands in one partition.
    consumer = Consumer(store, "dst", initial_position="earliest")
    partitions_by_key: dict[str | None, set[int]] = collections.defaultdict(set)
    for message in consumer.receive(max_messages=2000):
        partitions_by_key[message.key].add(message.partition)
    assert all(len(p) == 1 for p in partitions_by_key.values())


def test_properties_read_as_json_text_are_written_back_as_properties(
    spark: Any, store: Store, data_dir: Path
) -> None:
    TopicAdmin(store).create("src", partitions=1)
    TopicAdmin(store).create("dst", partitions=1)
    sent = {b"none": {}, b"some": {"a": "1", "ünï": '"q"'}}
    Producer(store, "src").send_batch([Message(v, properties=p) for v, p in sent.items()])
    source = (
        spark.readStream.format("sparkfn")
        .options(**spark_options(store))
        .option("topic", "src")
        .option("startingOffsets", "earliest")
        .option("propertiesAs", "json")
        .load()
    )
    assert dict(source.dtypes)["properties"] == "string"
    query = (
        source.select("value", "properties")
        .writeStream.format("sparkfn")
        .options(**spark_options(store))
        .option("topic", "dst")
        .option("checkpointLocation", str(data_dir / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    consumer = Consumer(store, "dst", initial_position="earliest")
    assert {m.value: m.properties for m in consumer.receive(max_messages=10)} == sent


def test_admission_control_caps_every_batch(spark: Any, store: Store, data_dir: Path) -> None:
    values = _fill(store, "src", 95)
    TopicAdmin(store).create("dst")
    query = _copy(spark, store, data_dir / "ck", maxRecordsPerBatch=20)
    rows = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert rows and max(rows) <= 20, rows
    assert sum(rows) == 95
    assert len(rows) == 5
    assert collections.Counter(_read_all(store, "dst")) == collections.Counter(values)


def test_a_copy_of_a_whole_topic_runs_one_batch(spark: Any, store: Store, data_dir: Path) -> None:
    # Spark tells offsets apart by their JSON text: the same offsets in
    # another key order made it run a second batch that read nothing, then
    # (AvailableNow) wait for input before it ended. Whether the order
    # changed hung on the source process's hash seed; the next test checks
    # the order itself.
    values = _fill(store, "src", 600, partitions=12)
    TopicAdmin(store).create("dst", partitions=2)
    query = _copy(spark, store, data_dir / "ck")
    assert sorted(p.name for p in (data_dir / "ck" / "offsets").glob("[0-9]*")) == ["0"]
    assert [p["numInputRows"] for p in query.recentProgress] == [600]
    assert collections.Counter(_read_all(store, "dst")) == collections.Counter(values)


def test_the_checkpoint_has_no_checksum_side_files(
    spark: Any, store: Store, data_dir: Path
) -> None:
    # sparkfn's session writes local files without Hadoop's .crc files: two
    # fewer file writes per checkpoint entry, two entries per micro-batch.
    _fill(store, "src", 50)
    TopicAdmin(store).create("dst")
    _copy(spark, store, data_dir / "ck")
    written = [p for p in (data_dir / "ck").rglob("*") if p.is_file()]
    assert any(p.parent.name == "offsets" for p in written)
    assert any(p.parent.name == "commits" for p in written)
    assert [p for p in written if p.name.endswith(".crc")] == []


def test_checkpoint_files_go_through_the_filesystem_api_and_are_never_replaced(
    spark: Any, data_dir: Path
) -> None:
    # FileContext, Spark's default, forks readlink and chmod for every
    # checkpoint file when Hadoop has no native library; sparkfn's session
    # uses the FileSystem API through its own manager, which opens the temp
    # files without the chmod (sparkfn.runtime.spark.checkpoints). It must
    # still never replace a batch's entry: a second writer of batch 0 fails
    # and the first one's stays.
    jvm = spark._jvm
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    offsets = data_dir / "ck" / "offsets"
    entry = jvm.org.apache.hadoop.fs.Path(str(offsets / "0"))
    managers = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    manager = managers.create(entry.getParent(), hadoop_conf)
    assert manager.getClass().getSimpleName() == "LocalCheckpointFileManager"
    manager.mkdirs(entry.getParent())
    first = manager.createAtomic(entry, False)
    first.write(bytearray(b"first"))
    first.close()
    second = manager.createAtomic(entry, False)
    second.write(bytearray(b"second"))
    with pytest.raises(Exception, match="FileAlreadyExists"):
        second.close()
    assert (offsets / "0").read_bytes() == b"first"
    # The refused writer's temp file may stay; Spark's logs read digit names only.
    assert [p.name for p in offsets.iterdir() if not p.name.startswith(".")] == ["0"]


def test_the_reader_answers_offsets_in_one_key_order(store: Store) -> None:
    _fill(store, "src", 300, partitions=12)
    options = {**_lower(spark_options(store)), "topic": "src", "startingoffsets": "earliest"}
    reader = SparkfnStreamReader(options, ["key", "value"])
    start = reader.initialOffset()
    assert list(start) == sorted(start)
    limit = reader.getDefaultReadLimit()
    end = reader.latestOffset(start, limit)
    assert list(end) == sorted(end)
    for seed in range(4):  # whatever order Spark hands back, "nothing new" reads the same
        shuffled = list(end.items())
        random.Random(seed).shuffle(shuffled)
        again = reader.latestOffset(dict(shuffled), limit)
        assert json.dumps(again) == json.dumps(end)
    assert list(reader.reportLatestOffset()) == sorted(end)


def test_restart_continues_from_checkpoint(spark: Any, store: Store, data_dir: Path) -> None:
    first = _fill(store, "src", 50)
    TopicAdmin(store).create("dst")
    _copy(spark, store, data_dir / "ck")
    more = [f"later-{i}".encode() for i in range(30)]
    Producer(store, "src").send_batch([Message(v) for v in more])
    _copy(spark, store, data_dir / "ck")
    assert collections.Counter(_read_all(store, "dst")) == collections.Counter(first + more)


def test_replayed_batch_id_is_skipped(store: Store, data_dir: Path) -> None:
    admin = TopicAdmin(store)
    admin.create("dst", partitions=1)
    topic = admin.get("dst")
    writer = SparkfnStreamWriter(
        {**{k.lower(): v for k, v in spark_options(store).items()}, "topic": "dst", "sinkid": "s1"},
        _value_schema(),
    )

    def staged_batch(tag: str, big: bool) -> StagedBatch:
        n = 3000 if big else 3
        table = stored_table([f"{tag}-{i}".encode() * (10 if big else 1) for i in range(n)])
        return StagedBatch([stage(store, topic, 0, table)])

    writer.commit([staged_batch("a", big=False)], 0)
    replay = staged_batch("b", big=True)
    assert replay.segments[0].location is not None
    writer.commit([replay], 0)  # the same batch id again: skipped
    assert [v.decode() for v in _read_all(store, "dst")] == ["a-0", "a-1", "a-2"]
    # The skipped replay's staged file is removed, not left behind.
    assert not store.path(replay.segments[0].location).exists()
    writer.commit([staged_batch("c", big=False)], 1)
    assert len(_read_all(store, "dst")) == 6


def _query_error(spark: Any, store: Store, data_dir: Path, **options: str) -> str:
    """Start a query reading with ``options``; return the error it fails with."""
    query = (
        spark.readStream.format("sparkfn")
        .options(**spark_options(store))
        .options(**options)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(data_dir / f"ck-{len(options)}-{time.time()}"))
        .start()
    )
    try:
        query.awaitTermination(60)
    except Exception as exc:  # pyspark's StreamingQueryException
        return str(exc)
    finally:
        query.stop()
    pytest.fail(f"a query with options {options} did not fail")


def test_bad_options_give_clear_errors(spark: Any, store: Store, data_dir: Path) -> None:
    TopicAdmin(store).create("src")
    assert "option 'topic' (or 'topics') is required" in _query_error(spark, store, data_dir)
    assert "topic public/default/nope does not exist" in _query_error(
        spark, store, data_dir, topic="nope"
    )
    assert "maxRecordsPerBatch must be a positive integer; got '-3'" in _query_error(
        spark, store, data_dir, topic="src", maxRecordsPerBatch="-3"
    )
    assert "propertiesAs must be map or json; got 'xml'" in _query_error(
        spark, store, data_dir, topic="src", propertiesAs="xml"
    )
    # The error types survive when used directly.
    with pytest.raises(TopicNotFoundError):
        SparkfnStreamWriter({"topic": "nope", **_lower(spark_options(store))}, _value_schema())
    with pytest.raises(ConfigError, match="checkpointLocation"):
        SparkfnStreamWriter({"topic": "src", **_lower(spark_options(store))}, _value_schema())


def _lower(options: dict[str, Any]) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in options.items()}


def test_bad_payload_for_json_topic_fails_the_query(
    spark: Any, store: Store, data_dir: Path
) -> None:
    _fill(store, "src", 5, partitions=1)  # values like b"message-000001": not JSON
    TopicAdmin(store).create("dst", schema_type="json")
    source = (
        spark.readStream.format("sparkfn")
        .options(**spark_options(store))
        .option("topic", "src")
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        source.select("value")
        .writeStream.format("sparkfn")
        .options(**spark_options(store))
        .option("topic", "dst")
        .option("checkpointLocation", str(data_dir / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"topic public/default/dst \(schema json\)"):
        query.awaitTermination(120)
    assert _read_all(store, "dst") == []


# --- crash tests: a real child process running Spark, killed with SIGKILL ---


def _start_child(
    store: Store, checkpoint: Path, env_extra: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, str(CHILD), store.url, str(store.data_dir), str(checkpoint), "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,  # the JVM joins the group, so killpg takes it too
    )


def _finish_child(child: subprocess.Popen[str], timeout: float = 180) -> str:
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        pytest.fail(f"child did not finish within {timeout} s")
    return out


def _kill_group(child: subprocess.Popen[str]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait(timeout=30)


def _kill_after_progress(child: subprocess.Popen[str], batches: int) -> None:
    """SIGKILL the child's process group once it reported ``batches`` batches."""
    assert child.stdout is not None
    seen = ""

    def progressed() -> bool:
        nonlocal seen
        assert child.stdout is not None
        line = child.stdout.readline()  # blocks until the child writes one
        seen += line
        return not line or (line.startswith("batch ") and int(line.split()[1]) >= batches)

    try:
        until(progressed, lambda: f"the child to report batch {batches}: {seen!r}", 120, every=0)
    except BaseException:
        _kill_group(child)
        raise
    time.sleep(random.uniform(0.0, 0.5))  # land somewhere inside a batch
    _kill_group(child)


@pytest.mark.long_running(60)
@pytest.mark.backend("sqlite")
def test_sigkill_mid_stream_then_restart_is_exactly_once(
    spark: Any, store: Store, data_dir: Path
) -> None:
    """Kill the query twice, at a random moment and at the worst one, then finish.

    The worst moment is right after the sink's transaction committed a batch
    and before Spark recorded it: the restart replays that batch id, and the
    sink must recognise and skip it. Each kill needs a child of its own; the
    last restart, which is not killed, runs the same query on this process's
    SparkSession (a driver that never saw the checkpoint), saving a JVM start.
    """
    values = _fill(store, "src", 2000)  # 20 batches of 100
    TopicAdmin(store).create("dst", partitions=2)
    checkpoint = data_dir / "ck"

    child = _start_child(store, checkpoint)
    _kill_after_progress(child, batches=2)
    first = _read_all(store, "dst")
    # At least three batches left: the restart replays or skips the last
    # planned batch, then commits the next one, where it is killed.
    assert len(first) <= len(values) - 300, "the first kill should land well before the end"
    planned = max(int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*"))

    child = _start_child(store, checkpoint, {KILL_AFTER_COMMIT_ENV: str(planned + 1)})
    _finish_child(child)
    assert child.returncode == -signal.SIGKILL, "the fault hook should have killed the driver"
    second = _read_all(store, "dst")
    assert len(first) < len(second) < len(values)

    query = start_copy(spark, store.url, str(store.data_dir), str(checkpoint), 100)
    query.awaitTermination(180)  # raises if the query failed
    assert not query.isActive, "the restarted copy did not finish within 180 s"
    assert collections.Counter(_read_all(store, "dst")) == collections.Counter(values)


def test_orphaned_staged_files_are_collected(store: Store, data_dir: Path) -> None:
    """A staged segment nobody committed is deleted once old; committed ones stay."""

    from sparkfn.topics import garbage

    admin = TopicAdmin(store)
    admin.create("t")
    topic = admin.get("t")
    n = 3000
    orphan = stage(store, topic, 0, stored_table([b"x" * 100] * n))
    Producer(store, "t").send_batch([Message(b"y" * 100) for _ in range(n)])
    assert orphan.location is not None
    from datetime import timedelta

    assert garbage.collect_orphans(store) == 0  # young: it may still be committed
    assert garbage.collect_orphans(store, older_than=timedelta(0)) == 1
    assert not store.path(orphan.location).exists()
    assert len(_read_all(store, "t")) == n  # the committed segment is intact
