"""An idle reader's net look at the store is spaced by what it costs, where hints are announced."""

from __future__ import annotations

import time
from pathlib import Path

from sparkfn.store import signals
from sparkfn.topics.spark.quiet import NET_CPU_SHARE, QuietWait


def _busy(seconds: float) -> dict[str, int]:
    began = time.thread_time()
    while time.thread_time() - began < seconds:
        pass
    return {"__gen__": 0}


def test_a_costly_look_that_finds_nothing_spaces_the_next_local_net_look(tmp_path: Path) -> None:
    quiet = QuietWait(tmp_path, ["h"], recheck=signals.LOCAL_RECHECK_SECONDS, wait=0.01)
    start = {"__gen__": 0}
    assert not quiet.nothing_new(start)  # never asked: the store is
    quiet.answered(start, quiet.look(_busy, 0.1))
    assert quiet.recheck >= 0.1 / NET_CPU_SHARE  # 10 s for a 0.1 s look
    assert quiet.nothing_new(start)  # answered from the hints, not the store
    quiet.answered(start, quiet.look(_busy, 0.0))
    assert quiet.recheck == signals.LOCAL_RECHECK_SECONDS  # back to the floor


def test_a_shared_store_keeps_its_short_recheck_whatever_a_look_costs(tmp_path: Path) -> None:
    # Writers on other machines are not announced: the look is how their input is seen.
    quiet = QuietWait(tmp_path, ["h"], recheck=signals.SHARED_RECHECK_SECONDS, wait=0.01)
    quiet.answered({"__gen__": 0}, quiet.look(_busy, 0.05))
    assert quiet.recheck == signals.SHARED_RECHECK_SECONDS


def test_a_look_that_found_work_spaces_nothing(tmp_path: Path) -> None:
    quiet = QuietWait(tmp_path, ["h"], recheck=signals.LOCAL_RECHECK_SECONDS, wait=0.01)
    quiet.look(_busy, 0.1)
    quiet.answered({"__gen__": 0}, {"__gen__": 1})
    assert quiet.recheck == signals.LOCAL_RECHECK_SECONDS


def test_a_touch_after_nothing_new_is_seen_at_the_next_call(tmp_path: Path) -> None:
    # Where touches are announced the hints are stat'ed again only after one (HintStamps).
    for recheck in (signals.LOCAL_RECHECK_SECONDS, signals.SHARED_RECHECK_SECONDS):
        quiet = QuietWait(tmp_path, ["h", "k"], recheck=recheck, wait=0.01)
        start = {"__gen__": 0}
        assert not quiet.nothing_new(start)
        quiet.answered(start, start)
        assert quiet.nothing_new(start)
        assert quiet.nothing_new(start)
        signals.touch(tmp_path, "k")
        assert not quiet.nothing_new(start)  # ask the store: a hint changed
        quiet.answered(start, start)
        assert quiet.nothing_new(start)
        time.sleep(0.01)  # a later modification time than the touch above
