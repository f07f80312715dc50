"""A file sink that records every call into every object, for the sink runtime tests.

It writes records as the built-in ``file`` sink does (it is one), and appends
one JSON line per call ``{"obj", "pid", "instance", "call", "thread", "t"}``
(plus ``value`` for ``write``) to ``configs["log"]``; ``obj`` is
``"<pid>-<id(self)>"``, unique per object across Spark's Python workers. One
``O_APPEND`` write per line, so processes can share the file.

Switches in ``configs`` (the rest goes to the file sink):

* ``fatal_trigger``: a path; the sink's own flush thread (``sink-flusher``)
  calls ``context.fatal(ValueError("boom"))`` once that file exists, writing
  the time just before the call to ``<path>.called`` and ``done`` to
  ``<path>.returned`` after it;
* ``fail_on``: a value whose ``write()`` raises ``RuntimeError("cannot write <value>")``;
* ``fatal_on``: a value whose ``write()`` calls ``context.fatal`` with that error;
* ``fail_flush_once``: a path; ``flush()`` raises ``RuntimeError("flush failed")``
  (before writing anything) until that file exists, and creates it as it raises.
* ``exit_on``: a value whose ``write()`` ends the Python worker (``os._exit(3)``).
* ``unreachable_once``: a path; ``open()`` raises ``BrokerUnreachableError`` (as a
  built-in does while its broker is down) until that file exists, and creates it as
  it raises.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from sparkfn.api.connector import Record, SinkContext
from sparkfn.api.errors import BrokerUnreachableError
from sparkfn.api.lifecycle import GracefulShutdown
from sparkfn.connectors.builtin.file_sink import FileSink

OWN_KEYS = ("log", "fatal_trigger", "fail_on", "fatal_on", "fail_flush_once", "exit_on",
            "unreachable_once")  # fmt: skip


class RecordingFileSink(FileSink, GracefulShutdown):
    """Records calls; see the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.obj = f"{os.getpid()}-{id(self)}"
        self.log_path = ""
        self.instance = -1
        self.fail_on: Any = None
        self.fatal_on: Any = None
        self.fail_flush_once: str | None = None
        self.context: SinkContext | None = None
        self.exit_on: Any = None
        self.stopping = threading.Event()
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

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        self.log_path = config["log"]
        self.instance = context.get_instance_id()
        self._record("open", topics=context.get_input_topics(), name=context.get_name())
        unreachable = config.get("unreachable_once")
        if unreachable and not os.path.exists(unreachable):
            with open(unreachable, "w") as f:
                f.write("unreachable once\n")
            msg = "sink (recording): cannot reach the broker at 127.0.0.1:1 (step: connect)"
            raise BrokerUnreachableError(msg)
        self.fail_on = config.get("fail_on")
        self.fatal_on = config.get("fatal_on")
        self.fail_flush_once = config.get("fail_flush_once")
        self.context = context
        self.exit_on = config.get("exit_on")
        super().open({k: v for k, v in config.items() if k not in OWN_KEYS}, context)
        trigger = config.get("fatal_trigger")
        if trigger:
            self.thread = threading.Thread(
                target=self._flusher, args=(trigger, context), name="sink-flusher", daemon=True
            )
            self.thread.start()

    def _flusher(self, trigger: str, context: SinkContext) -> None:
        while not self.stopping.is_set():
            if os.path.exists(trigger):
                with open(f"{trigger}.called", "a") as f:
                    f.write(f"{time.time()}\n")
                context.fatal(ValueError("boom"))
                with open(f"{trigger}.returned", "a") as f:
                    f.write("done\n")
                return
            time.sleep(0.05)

    def write(self, record: Record) -> None:
        self._record("write", value=record.value)
        if self.fail_on is not None and record.value == self.fail_on:
            msg = f"cannot write {record.value}"
            raise RuntimeError(msg)
        if self.fatal_on is not None and record.value == self.fatal_on and self.context:
            self.context.fatal(RuntimeError(f"cannot write {record.value}"))
        if self.exit_on is not None and record.value == self.exit_on:
            os._exit(3)  # as a segfault or the OOM killer would: no except, no finally
        super().write(record)

    def flush(self) -> None:
        self._record("flush", lines=len(self.buffer))
        if self.buffer and self.fail_flush_once and not os.path.exists(self.fail_flush_once):
            with open(self.fail_flush_once, "w") as f:
                f.write("failed once\n")
            msg = "flush failed"
            raise RuntimeError(msg)
        super().flush()

    def prepare_to_shutdown(self) -> None:
        self._record("prepare_to_shutdown")

    def shutdown(self) -> None:
        self._record("shutdown")
        self.stopping.set()

    def close(self) -> None:
        self._record("close")
        self.stopping.set()
        super().close()
