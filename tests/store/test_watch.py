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
    monkeypatch.setattr(watch, "_subscriptions", None)
    return str(request.param)


def _send_later(store: Store, topic: str, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, lambda: Producer(store, topic).send(b"one"))
    timer.start()
    return timer


@pytest.mark.parametrize("announced", [True, False])
def test_a_waiter_wakes_on_a_commit_and_otherwise_times_out(
    store: Store, how: str, announced: bool
) -> None:
    info = TopicAdmin(store).create("t")
    names = [signals.topic_hint(info.id)]
    stamps = watch.HintStamps(store.data_dir, announced=announced)
    seen = stamps.now(names)
    assert seen == signals.stamp(store.data_dir, names)
    started = time.monotonic()
    assert stamps.wait(names, seen, 0.3, 0.02) == seen
    assert time.monotonic() - started >= 0.3
    timer = _send_later(store, "t", 0.2)
    started = time.monotonic()
    now = stamps.wait(names, seen, 30.0, 0.02)
    timer.join()
    assert now != seen
    assert now == signals.stamp(store.data_dir, names)
    assert time.monotonic() - started < 10.0  # woken by the commit, not the timeout
    stamps.close()


def test_an_announced_stamp_is_taken_again_only_after_a_touch(
    store: Store, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = TopicAdmin(store).create("t")
    names = [signals.topic_hint(info.id), signals.control_hint("public/default/f")]
    stamps = watch.HintStamps(store.data_dir, announced=True)
    first = stamps.now(names)
    counted: list[int] = []
    real = watch.stamp

    def counting(data_dir: object, hints: list[str]) -> tuple[int, ...]:
        counted.append(len(hints))
        return real(data_dir, hints)  # type: ignore[arg-type]

    monkeypatch.setattr(watch, "stamp", counting)
    assert stamps.now(names) == first
    # Without the kernel's announcements every call stats every hint.
    assert counted == ([] if how == "inotify" else [2])
    Producer(store, "t").send(b"one")  # its commit touches the topic's hint
    assert stamps.now(names) != first
    assert stamps.now(names) == real(store.data_dir, names)
    assert counted[-1] == 2
    # Other hints: stamped anew, whatever the kernel said.
    assert stamps.now(names[:1]) == real(store.data_dir, names[:1])
    stamps.close()


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
