"""Commit hints: touched when a topic's append commits, never for a rolled-back one."""

from __future__ import annotations

import pytest

from sparkfn.store import signals
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer


def test_an_append_touches_its_topics_hint_after_commit(store: Store) -> None:
    info = TopicAdmin(store).create("t")
    other = TopicAdmin(store).create("u")
    names = [signals.topic_hint(info.id), signals.topic_hint(other.id)]
    assert signals.stamp(store.data_dir, names) == (0, 0)
    Producer(store, "t").send(b"one")
    first = signals.stamp(store.data_dir, names)
    assert first[0] > 0
    assert first[1] == 0  # only the topic appended to
    Producer(store, "t").send(b"two")
    second = signals.stamp(store.data_dir, names)
    assert second[0] >= first[0]
    assert second[1] == 0


def test_a_rolled_back_transaction_touches_nothing(store: Store) -> None:
    TopicAdmin(store).create("t")
    info = TopicAdmin(store).get("t")
    name = signals.topic_hint(info.id)
    with pytest.raises(RuntimeError), store.write() as conn:
        signals.hint_on_commit(conn, name)
        msg = "rolled back"
        raise RuntimeError(msg)
    assert signals.stamp(store.data_dir, [name]) == (0,)
    with store.write() as conn:  # the pooled connection carries no leftover hint
        pass
    assert signals.stamp(store.data_dir, [name]) == (0,)
    Producer(store, "t").send_batch([Message(value=b"x")])
    assert signals.stamp(store.data_dir, [name])[0] > 0
