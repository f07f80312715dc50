"""Window functions of the window tests: each window as one line of text.

``Joined`` returns ``"v1,v2,...|end"`` (``end``: the window's end for a
time window, ``-`` for a counted one). ``Holding`` does the same, but on a
window holding the value ``user_config["hold_value"]`` it creates
``hold_file`` and blocks, so a crash test can SIGKILL the process with that
window in flight. ``ValueTime`` reads an event time from the value
``"<ms>:<text>"``; ``slow`` sleeps for values starting with ``slow``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sparkfn import Context, TimestampExtractor, Window, WindowFunction


def _line(inputs: Window) -> str:
    end = "-" if inputs.end is None else str(inputs.end)
    return ",".join(str(record.value) for record in inputs) + f"|{end}"


class Joined(WindowFunction):
    def process(self, inputs: Window, context: Context) -> Any:
        return _line(inputs)


class Holding(WindowFunction):
    def process(self, inputs: Window, context: Context) -> Any:
        hold = context.get_user_config_value("hold_value")
        if hold is not None and hold in inputs.values():
            Path(context.get_user_config_value("hold_file")).touch()
            parent = os.getppid()
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:  # until the test kills the process
                if os.getppid() != parent:
                    os._exit(1)
                time.sleep(0.1)
        return _line(inputs)


class ValueTime(TimestampExtractor):
    def extract_timestamp(self, input: Any) -> int:
        return int(str(input).split(":", 1)[0])


def slow(input: str) -> str:
    """A plain function for timeout_ms: values starting with ``slow`` take 2 s."""
    if input.startswith("slow"):
        time.sleep(2.0)
    if input.startswith("spin"):
        while True:
            pass
    return input + "!"
