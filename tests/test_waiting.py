"""The suite's one bounded wait (tests/waiting.py) returns what it waited for and fails saying what."""

from __future__ import annotations

import time

import pytest

from waiting import until


def test_until_returns_the_first_true_answer() -> None:
    answers = iter([None, 0, [], "ready"])
    assert until(lambda: next(answers), "an answer", timeout=5, every=0.001) == "ready"


def test_until_fails_after_its_timeout_naming_what_and_how_far() -> None:
    said: list[str] = []

    def how_far() -> str:  # asked once, at the failure
        said.append("asked")
        return f"a miracle (asked {len(said)} time)"

    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        until(lambda: False, how_far, 0.2, every=0.01)
    assert 0.2 <= time.monotonic() - started < 5
    assert str(failed.value) == "timed out after 0.2 s waiting for a miracle (asked 1 time)"
