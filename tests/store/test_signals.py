"""Commit hints: touched when a write commits (appends, commands, lifecycle records), never
for a rolled-back one."""

from __future__ import annotations

import os

import pytest

from sparkfn.api.lifecycle import StopMode
from sparkfn.runtime.lifecycle import control, objects
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


def test_commands_and_lifecycle_writes_touch_their_hints(store: Store) -> None:
    cid = control.control_id("function", "public/default/f")
    names = [signals.COMMANDS_HINT, signals.control_hint(cid)]
    assert signals.stamp(store.data_dir, names) == (0, 0)
    objects.issue_command(store, cid, "close", [0], 1)
    after_command = signals.stamp(store.data_dir, names)
    assert after_command[0] > 0
    assert after_command[1] == 0
    control.begin_run(store, cid, "function", 1, "started")
    control.request_stop(store, cid, StopMode.DRAIN, {})
    requested = signals.stamp(store.data_dir, names)
    assert requested[1] > 0
    os.utime(store.data_dir / signals.HINTS_DIR / names[1], ns=(1, 1))
    with store.write() as conn:
        control.record_final_commit(conn, cid)
    assert signals.stamp(store.data_dir, names)[1] > 1
