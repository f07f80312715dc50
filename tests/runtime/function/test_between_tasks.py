"""What a function's own threads do between tasks: logs wait for the next task, publishes raise.

Outputs commit with a batch. Between tasks there is none: a log record
waits for the next task's output, and a publish raises in the thread that
made it instead of being dropped when the next task starts.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from sparkfn import FunctionConfig
from sparkfn.testing import FunctionHarness

FUNCS = Path(__file__).resolve().parents[1] / "funcs"


def _in_thread(action: object) -> BaseException | None:
    """Run ``action()`` in a thread of its own; what it raised, if anything."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            action()  # type: ignore[operator]
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, name="the-functions-own-thread")
    thread.start()
    thread.join(10)
    return raised[0] if raised else None


def test_a_threads_log_between_tasks_goes_out_and_its_publish_raises() -> None:
    config = FunctionConfig.build(
        name="keeper",
        py=str(FUNCS / "context_keeper.py"),
        classname="context_keeper.ContextKeeper",
        inputs=["in"],
        output="out",
        log_topic="logs",
    )
    harness = FunctionHarness(config, input_schema="bytes", output_schema="bytes")
    harness.send(b"a")
    [context] = sys.modules["context_keeper"].KEPT
    logger = context.get_logger()
    assert _in_thread(lambda: logger.warning("between tasks")) is None
    error = _in_thread(lambda: context.publish("out", b"lost?"))
    assert isinstance(error, RuntimeError)
    assert "context.publish called in thread 'the-functions-own-thread' while no batch" in str(
        error
    )
    harness.send(b"b")
    assert harness.logs == ["between tasks"]
    assert harness.outputs == [b"a", b"b"]
    with pytest.raises(RuntimeError, match="while no batch of the instance runs"):
        context.publish("out", b"from the test's thread, between tasks too")
