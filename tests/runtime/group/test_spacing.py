"""A shared group's batches start at least ``spacing`` x min(1, width / 20) apart."""

from __future__ import annotations

import time

import pytest

from sparkfn.runtime.group.extras import FULL_WIDTH, BatchSpacing


def test_the_first_batch_and_a_group_without_spacing_start_at_once() -> None:
    assert BatchSpacing(0.3).due_in(time.monotonic()) == 0.0
    none = BatchSpacing(0.0)
    none.started(200)
    assert none.due_in(time.monotonic()) == 0.0


@pytest.mark.parametrize(
    ("width", "gap"),
    [(1, 0.3 / FULL_WIDTH), (10, 0.15), (FULL_WIDTH, 0.3), (200, 0.3)],
)
def test_the_wait_grows_with_the_last_batchs_width_up_to_the_spacing(
    width: int, gap: float
) -> None:
    spacing = BatchSpacing(0.3)
    spacing.started(width)
    now = time.monotonic()
    assert spacing.due_in(now) == pytest.approx(gap, abs=0.01)
    assert spacing.due_in(now + gap + 0.001) == 0.0  # due once the gap has passed


def test_wait_sleeps_out_the_rest_of_the_gap() -> None:
    spacing = BatchSpacing(0.2)
    spacing.started(FULL_WIDTH)
    began = time.monotonic()
    spacing.wait()
    assert time.monotonic() - began >= 0.15
    spacing.started(1)  # a batch of one member: the next waits 10 ms
    began = time.monotonic()
    spacing.wait()
    assert time.monotonic() - began < 0.1
