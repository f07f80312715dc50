"""The topic sink's identity across checkpoints, and which staged files a failed commit deletes."""

from __future__ import annotations

import collections
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text
from test_spark_source import _copy
from topic_data import read_all, stored_table, value_schema

from sparkfn.api.errors import ConfigError
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.log import StagedSegment, stage
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark.commit import commit_staged
from sparkfn.topics.spark.source import spark_options
from sparkfn.topics.spark.writer import (
    SINK_ID_FILE,
    SparkfnStreamWriter,
    StagedBatch,
    sink_identity,
)


def _staged_file(store: Store, topic: str, tag: str) -> StagedSegment:
    """A segment staged as a file (too big to inline), committed by nobody yet."""
    table = stored_table([f"{tag}-{i}".encode() * 10 for i in range(3000)])
    seg = stage(store, TopicAdmin(store).get(topic), 0, table)
    assert seg.location is not None
    return seg


def test_a_new_checkpoint_at_the_same_path_writes_its_batches(
    spark: Any, store: Store, data_dir: Path
) -> None:
    """Batch ids start over with a new checkpoint: they are new batches, not replays to skip."""
    admin = TopicAdmin(store)
    admin.create("src", partitions=2)
    admin.create("dst", partitions=2)
    first = [f"first-{i}".encode() for i in range(40)]
    Producer(store, "src").send_batch([Message(v) for v in first])
    checkpoint = data_dir / "ck"
    _copy(spark, store, checkpoint)
    assert (checkpoint / SINK_ID_FILE).exists()
    shutil.rmtree(checkpoint)
    more = [f"more-{i}".encode() for i in range(25)]
    Producer(store, "src").send_batch([Message(v) for v in more])
    _copy(spark, store, checkpoint)  # reads src from the earliest offset again, as asked
    assert collections.Counter(read_all(store, "dst")) == collections.Counter(first + first + more)


def test_the_sink_id_lives_in_the_checkpoint(data_dir: Path) -> None:
    fresh = data_dir / "fresh"
    made = sink_identity("t", None, str(fresh))
    assert made.startswith("checkpoint-")
    assert sink_identity("t", None, str(fresh)) == made  # kept
    assert sink_identity("t", None, fresh.as_uri()) == made  # file: URLs name the same place
    assert sink_identity("t", None, str(data_dir / "other")) != made
    # A checkpoint Spark committed batches in before the id file existed keeps the
    # id sparkfn used then (its path), so a replay after upgrading is still skipped.
    old = data_dir / "old"
    (old / "commits").mkdir(parents=True)
    (old / "commits" / "0").write_text("v1\n{}\n")
    assert sink_identity("t", None, str(old)) == str(old.absolute())
    assert sink_identity("t", "chosen", str(fresh)) == "chosen"  # an explicit sinkId wins
    with pytest.raises(ConfigError, match="not on the local file system; set option 'sinkId'"):
        sink_identity("t", None, "s3a://bucket/ck")
    with pytest.raises(ConfigError, match="checkpointLocation"):
        sink_identity("t", None, None)


def test_commit_staged_deletes_files_only_when_nothing_can_reference_them(store: Store) -> None:
    TopicAdmin(store).create("t", partitions=1)

    def raising(conn: Connection) -> bool:
        raise RuntimeError("the body failed before COMMIT")

    seg = _staged_file(store, "t", "a")
    with pytest.raises(RuntimeError, match="before COMMIT"):
        commit_staged(store, [seg], raising)
    assert not store.path(seg.location or "").exists()  # rolled back: nobody references it

    seg = _staged_file(store, "t", "b")
    assert commit_staged(store, [seg], lambda conn: False) is False  # a replay
    assert not store.path(seg.location or "").exists()

    seg = _staged_file(store, "t", "c")
    assert commit_staged(store, [seg], lambda conn: True) is True
    assert store.path(seg.location or "").exists()


def _fail_at_commit(conn: Connection) -> None:
    """Make this PostgreSQL transaction's COMMIT fail, after every statement succeeded."""
    conn.execute(
        text(
            "CREATE TEMP TABLE commit_fails (x int UNIQUE DEFERRABLE INITIALLY DEFERRED) "
            "ON COMMIT DROP"
        )
    )
    conn.execute(text("INSERT INTO commit_fails VALUES (1), (1)"))  # checked at COMMIT


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_failed_commit_keeps_the_files_it_may_have_made_visible(store: Store) -> None:
    """A COMMIT that fails may have committed (a connection lost after the server did): keep."""
    TopicAdmin(store).create("t", partitions=1)
    seg = _staged_file(store, "t", "a")

    def body(conn: Connection) -> bool:
        _fail_at_commit(conn)
        return True

    with pytest.raises(Exception, match="commit_fails"):
        commit_staged(store, [seg], body)
    assert store.path(seg.location or "").exists()


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_the_topic_sinks_abort_deletes_only_what_did_not_commit(store: Store) -> None:
    TopicAdmin(store).create("dst", partitions=1)
    options = {k.lower(): str(v) for k, v in spark_options(store).items()}
    writer = SparkfnStreamWriter(
        {**options, "topic": "dst", "sinkid": "s1"},
        value_schema(),
    )
    committed = _staged_file(store, "dst", "a")
    writer.commit([StagedBatch([committed])], 0)
    writer.abort([StagedBatch([committed])], 0)  # Spark's abort after a commit that landed
    assert store.path(committed.location or "").exists()
    assert len(read_all(store, "dst")) == 3000

    failed = _staged_file(store, "dst", "b")
    with store.engine.connect() as conn:  # every COMMIT of a sink batch fails from now on
        conn.execute(
            text(
                "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION 'commit refused by the test'; END $$ LANGUAGE plpgsql"
            )
        )
        conn.execute(
            text(
                "CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON sink_commits "
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        )
        conn.commit()
    with pytest.raises(Exception, match="commit refused by the test"):
        writer.commit([StagedBatch([failed])], 1)
    assert store.path(failed.location or "").exists()  # the outcome was unknown to the sink
    writer.abort([StagedBatch([failed])], 1)  # the store says batch 1 did not commit
    assert not store.path(failed.location or "").exists()
    assert len(read_all(store, "dst")) == 3000
