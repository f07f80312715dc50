"""Poison message tests: ``input + "!"``, but input ``exit`` ends the Python worker.

``os._exit(3)`` kills the process at once, as a segfault or the OOM killer
would: no ``except``, no ``finally``, no ``close()``. With user config
``every`` set, every input does.
"""

from __future__ import annotations

import os
from typing import Any

from sparkfn import Context, Function


class WorkerKiller(Function):
    def process(self, input: Any, context: Context) -> Any:
        if input == "exit" or context.get_user_config_value("every"):
            os._exit(3)
        return f"{input}!"
