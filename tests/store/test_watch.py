"""Waiting for commit hints: woken by a commit, through inotify or by polling."""

from __future__ import annotations

import threading
import time

import pytest

from sparkfn.store import signals, watch
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.producer import Producer


@pytest.fixture(params=["inotify", "polled"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the kernel's announcements and with ``stat`` polling."""
    if request.param == "inotify" and watch._LIBC is None:
        pytest.skip("no inotify on this system")
    if request.param == "polled":
        monkeypatch.setattr(watch, "_LIBC", None)
    monkeypatch.setattr(watch, "_waiters", {})
    monkeypatch.setattr(watch, "_subscriptions", None)
    return str(request.param)


def _send_later(store: Store, topic: str, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, lambda: Producer(store, topic).send(b"one"))
    timer.start()
    return timer


def test_a_waiter_wakes_on_a_commit_and_otherwise_times_out(store: Store, how: str) -> None:
    info = TopicAdmin(store).create("t")
    names = [signals.topic_hint(info.id)]
    seen = signals.stamp(store.data_dir, names)
    started = time.monotonic()
    assert watch.wait_for_change(store.data_dir, names, seen, 0.3, 0.02) == seen
    assert time.monotonic() - started >= 0.3
    timer = _send_later(store, "t", 0.2)
    started = time.monotonic()
    now = watch.wait_for_change(store.data_dir, names, seen, 30.0, 0.02)
    timer.join()
    assert now != seen
    assert now == signals.stamp(store.data_dir, names)
    assert time.monotonic() - started < 10.0  # woken by the commit, not the timeout


def test_a_subscription_calls_back_on_each_touch_until_cancelled(store: Store, how: str) -> None:
    info = TopicAdmin(store).create("t")
    name = signals.topic_hint(info.id)
    touched = threading.Event()
    cancel = watch.subscribe(store.data_dir, name, touched.set)
    if how == "polled":
        assert cancel is None  # the caller polls the hint itself
        return
    assert cancel is not None
    assert not touched.wait(0.2)
    _send_later(store, "t", 0.1).join()
    assert touched.wait(10.0)
    cancel()
    touched.clear()
    Producer(store, "t").send(b"two")
    assert not touched.wait(0.5)
