"""The task-crash tests' function: echo ``input + "!"``, count each message by its first word.

Every message's first word is unique (``m-<partition>-<offset>``), so its
counter says how often that message's state change landed. Two test hooks,
set through ``user_config``:

* ``sleep_seconds``: sleep this long per message, so tasks run long enough
  for the test to kill the Python worker running one.
* ``busy_dir``: touch ``<busy_dir>/<pid>`` on each message, so the test can
  tell a worker in the middle of a task from an idle one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sparkfn import Context, Function


class SlowEchoCounter(Function):
    def process(self, input: Any, context: Context) -> Any:
        context.incr_counter(input.split(maxsplit=1)[0], 1)
        context.incr_counter("messages", 1)
        busy_dir = context.get_user_config_value("busy_dir")
        if busy_dir:
            Path(busy_dir, str(os.getpid())).touch()
        delay = context.get_user_config_value("sleep_seconds")
        if delay:
            time.sleep(float(delay))
        return input + "!"
