"""Topics a ``topicsPattern`` reader gains while it runs (``topics/discovery.py``), both stores.

The reader is driven directly, as Spark's driver calls it: a topic created
after it started is in the next batch's offsets, read from its first
message whatever ``startingOffsets`` says, and the subscription gets its
cursors before any plan can name it.
"""

from __future__ import annotations

import os
import time

import pytest

from sparkfn.api.errors import ConfigError
from sparkfn.store import signals
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.discovery import TopicDiscovery
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark.planning import TopicRange
from sparkfn.topics.spark.reader import SparkfnStreamReader


def _reader(store: Store, **options: str) -> SparkfnStreamReader:
    opts = {"storeurl": store.url, "datadir": str(store.data_dir), **options}
    return SparkfnStreamReader(opts, ["key", "value"])


def _send(store: Store, topic: str, count: int) -> None:
    Producer(store, topic).send_batch([Message(f"{topic}-{i}".encode()) for i in range(count)])


def test_a_topic_created_while_reading_is_read_from_its_first_message(store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in-a", partitions=2)
    admin.create("other")
    _send(store, "in-a", 4)  # before the subscription: skipped, it starts at latest
    reader = _reader(
        store,
        topicspattern="public/default/in-.*",
        startingoffsets="latest",
        subscription="sub",
    )
    assert [str(t.name) for t in reader.topics] == ["public/default/in-a"]
    start = reader.initialOffset()
    limit = reader.getDefaultReadLimit()
    assert reader.latestOffset(start, limit) == start  # nothing new

    b = admin.create("in-b", partitions=3)
    _send(store, "in-b", 7)
    _send(store, "other", 5)  # not matched: never read
    end = reader.latestOffset(start, limit)
    assert [str(t.name) for t in reader.topics] == ["public/default/in-a", "public/default/in-b"]
    with store.read() as conn:
        cursors = subscription.cursors(conn, "sub")
    assert {p: c for (t, p), c in cursors.items() if t == b.id} == {0: 0, 1: 0, 2: 0}
    ranges = reader.partitions(start, end)
    read = {(r.topic.name.name, r.partition): (r.start, r.end) for r in ranges}
    assert all(isinstance(r, TopicRange) for r in ranges)
    assert sum(hi - lo for lo, hi in read.values()) == 7
    assert {topic for topic, _ in read} == {"in-b"}


def test_discovery_is_due_after_a_topic_is_created_or_a_period_passed(store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in-a")
    discovery = TopicDiscovery(store.url, str(store.data_dir), "public/default/in-.*")
    assert not discovery.due()
    admin.create("in-b")  # its commit touches the topics hint
    assert discovery.due()
    time.sleep(0.06)  # past the hint's tick (see the next test)
    assert [t.name.name for t in discovery.matching()] == ["in-a", "in-b"]
    assert not discovery.due()
    assert TopicDiscovery(store.url, str(store.data_dir), "x", period=0.0).due()


def test_a_pattern_that_matches_nothing_is_a_clear_error(store: Store) -> None:
    with pytest.raises(ConfigError, match="topicsPattern 'public/default/none-.\\*' matches no"):
        _reader(store, topicspattern="public/default/none-.*")


def test_a_topic_created_while_the_reader_starts_is_read_whole(store: Store) -> None:
    """The caller listed the pattern's topics; one made before its reader was built is new too."""
    admin = TopicAdmin(store)
    a = admin.create("in-a")
    with store.write() as conn:  # the subscription began with in-a only
        subscription.ensure(conn, "sub", [a], "latest")
    b = admin.create("in-b", partitions=2)
    _send(store, "in-b", 6)
    reader = _reader(
        store,
        topics="in-a",
        topicspattern="public/default/in-.*",
        startingoffsets="latest",
        subscription="sub",
    )
    assert [t.name.name for t in reader.topics] == ["in-a", "in-b"]
    with store.read() as conn:
        cursors = subscription.cursors(conn, "sub")
    assert {p: c for (t, p), c in cursors.items() if t == b.id} == {0: 0, 1: 0}


def test_a_creation_in_the_same_tick_as_the_list_is_looked_for_again(store: Store) -> None:
    """A file's time moves in coarse ticks: a list right after a touch is not the last word."""
    discovery = TopicDiscovery(store.url, str(store.data_dir), "public/default/in-.*")
    hint = store.data_dir / signals.HINTS_DIR / signals.TOPICS_HINT
    hint.parent.mkdir(parents=True, exist_ok=True)
    hint.touch()
    now = time.time_ns()
    os.utime(hint, ns=(now, now))
    discovery.listed()
    assert discovery.due()  # another topic may have come in the same tick
    earlier = now - 10**9
    os.utime(hint, ns=(earlier, earlier))
    discovery.listed()
    assert not discovery.due()


def test_a_pattern_lists_only_its_own_namespaces_topics_whatever_its_regex_says(
    store: Store,
) -> None:
    """Pulsar's rule: the namespace written at the start is the only one listed."""
    admin = TopicAdmin(store)
    for topic in ("acme/app/in-a", "acme/other/in-b", "evil/x/secret"):
        admin.create(topic)
    discovery = TopicDiscovery(store.url, str(store.data_dir), "acme/app/in-.*|evil/.*|acme/.*")
    assert [str(t.name) for t in discovery.matching()] == ["acme/app/in-a"]
    reader = _reader(store, topicspattern="acme/app/in-.*|evil/x/.*", subscription="spy")
    assert [str(t.name) for t in reader.topics] == ["acme/app/in-a"]
    evil = admin.get("evil/x/secret")
    with store.read() as conn:
        assert not [key for key in subscription.cursors(conn, "spy") if key[0] == evil.id]
