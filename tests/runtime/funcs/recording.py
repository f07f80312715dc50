"""A function that records every call into every object, for lifecycle tests.

Each call appends one JSON line ``{"obj", "pid", "instance", "call", "thread",
"t"}`` to ``user_config["log"]`` (O_APPEND writes of one line are atomic, so
several Spark worker processes can share the file). ``obj`` is unique per
object across processes.

Behaviour switches in ``user_config``:

* ``sleep``: seconds to sleep in every ``process`` (to be caught mid-batch);
* ``close_sleep``: seconds to sleep in ``close`` (a slow close);
* ``fatal_trigger``: a path; a thread started in ``initialize`` calls
  ``context.fatal(ValueError("boom"))`` once that file exists, and writes the
  time of the call to ``<path>.called``;
* ``crash_every``: k > 0: the first time a message with offset k-1 (mod k) is
  processed it raises :class:`Crash` (a
  BaseException: a crash, not a message error); offsets already crashed
  are remembered as files in ``crashed_dir``;
* ``crash_instance``: an instance id that raises :class:`Crash` on its first
  message while ``crash_trigger`` exists (once per trigger file).

Outputs ``"<instance>:<input>"``; ``prepare_to_shutdown`` returns
``"final:<instance>:<obj>"``.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from typing import Any

from sparkfn import Context, Function
from sparkfn.api.lifecycle import GracefulShutdown


class Crash(BaseException):  # noqa: N818 - a crash, deliberately not an Exception
    """Escapes the per-message error handling: the task (and its worker) fail."""


class Recording(Function, GracefulShutdown):
    """Records calls; see the module docstring."""

    def __init__(self) -> None:
        self.obj = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.log_path = ""
        self.instance = -1
        self.stop_thread = threading.Event()
        self.thread: threading.Thread | None = None

    def _record(self, call: str, **extra: Any) -> None:
        line = {
            "obj": self.obj,
            "pid": os.getpid(),
            "instance": self.instance,
            "call": call,
            "thread": threading.current_thread().name,
            "t": time.time(),
            **extra,
        }
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)

    def initialize(self, context: Context) -> None:
        self.log_path = context.get_user_config_value("log")
        self.instance = context.get_instance_id()
        self.config = dict(context.get_user_config_map())
        self._record("initialize")
        trigger = self.config.get("fatal_trigger")
        if trigger:
            self.thread = threading.Thread(
                target=self._watch, args=(trigger, context), name="boom-thread", daemon=True
            )
            self.thread.start()

    def _watch(self, trigger: str, context: Context) -> None:
        while not self.stop_thread.is_set():
            if os.path.exists(trigger):
                with open(f"{trigger}.called", "a") as f:
                    f.write(f"{time.time()}\n")
                context.fatal(ValueError("boom"))
                return
            time.sleep(0.05)

    def process(self, input: Any, context: Context) -> str:
        offset = context.get_message_id().entry_id()
        self._record("process", value=input, offset=offset)
        if self.config.get("sleep"):
            time.sleep(float(self.config["sleep"]))
        self._maybe_crash(offset)
        return f"{self.instance}:{input}"

    def _maybe_crash(self, offset: int) -> None:
        every = int(self.config.get("crash_every") or 0)
        if every and offset % every == every - 1:
            marker = f"{self.config['crashed_dir']}/{offset}"
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return  # crashed here before: the replay goes through
            self._record("crash", offset=offset)
            raise Crash(f"crash at offset {offset}")
        if self.config.get("crash_instance") == self.instance:
            trigger = self.config["crash_trigger"]
            if os.path.exists(trigger):
                os.rename(trigger, f"{trigger}.done-{self.obj}")
                self._record("crash", offset=offset)
                raise Crash(f"instance {self.instance} crashed")

    def prepare_to_shutdown(self) -> str:
        self._record("prepare_to_shutdown")
        return f"final:{self.instance}:{self.obj}"

    def shutdown(self) -> None:
        self._record("shutdown")
        self.stop_thread.set()

    def close(self) -> None:
        self._record("close")
        self.stop_thread.set()
        if self.config.get("close_sleep"):
            time.sleep(float(self.config["close_sleep"]))
