"""Group tests: every output names the function that made it, ``<name>:<input>``.

An input ``raise`` raises (a message error: retried, then dead-lettered); an
input ``fatal`` calls ``context.fatal`` (the instance dies); an input ``exit``
ends the Python worker (``os._exit(3)``, as a segfault or the OOM killer would). User config
``fail`` (``raise`` or ``fatal``) does the same on every input; user config
``sleep_on`` names an input whose call sleeps ``sleep`` seconds first, once:
the call creates the file ``sleep_flag`` names, and sleeps only if it was not there.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sparkfn import Context, Function


class NamedEcho(Function):
    def process(self, input: Any, context: Context) -> Any:
        if input == context.get_user_config_value("sleep_on"):
            flag = Path(context.get_user_config_value("sleep_flag"))
            if not flag.exists():
                flag.touch()
                time.sleep(float(context.get_user_config_value("sleep")))
        if input == "exit":
            os._exit(3)
        fail = context.get_user_config_value("fail")
        if input == "raise" or fail == "raise":
            msg = f"{context.get_function_name()} refuses {input!r}"
            raise ValueError(msg)
        if input == "fatal" or fail == "fatal":
            context.fatal(RuntimeError(f"{context.get_function_name()} was told to die"))
        return f"{context.get_function_name()}:{input}"
