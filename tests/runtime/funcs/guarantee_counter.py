"""The crash tests' function: echo ``input + "!"`` and count every word and message.

Each message's first word is unique (``m-<partition>-<offset>``), so its
counter says how often that message's state change landed. Two test hooks,
set through ``user_config`` and matched against the message id
(``partition:offset``), make the moment of a SIGKILL deterministic:

* ``hold_at`` / ``hold_file``: on reaching the message, create ``hold_file``
  and block, so the batch stays in flight until the test kills the process.
* ``wait_at`` / ``wait_for``: on reaching the message, wait until every path
  in ``wait_for`` exists (other functions are holding), then go on.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sparkfn import Context, Function


def _block_until_orphaned() -> None:
    """Block; exit once the Spark daemon that forked this worker is gone."""
    parent = os.getppid()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(0.1)


class GuaranteeCounter(Function):
    def process(self, input: Any, context: Context) -> Any:
        for word in input.split():
            context.incr_counter(word, 1)
        context.incr_counter("messages", 1)
        message_id = str(context.get_message_id())
        if message_id == context.get_user_config_value("wait_at"):
            deadline = time.monotonic() + 300
            paths = context.get_user_config_value("wait_for") or []
            while not all(os.path.exists(p) for p in paths):
                if time.monotonic() > deadline:
                    msg = f"gave up waiting for {paths}"
                    raise TimeoutError(msg)
                time.sleep(0.1)
        if message_id == context.get_user_config_value("hold_at"):
            Path(context.get_user_config_value("hold_file")).touch()
            _block_until_orphaned()
        return input + "!"
