"""Sources that record every call made into them, for the lifecycle tests.

A :class:`CallLog` numbers the entry and the exit of every call from one
thread-safe counter, so a test can assert *order* ("close entered after every
other call had returned"), not only counts.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from sparkfn.api.connector import (
    PushSource,
    Record,
    SinkContext,
    Source,
    SourceContext,
)
from sparkfn.api.lifecycle import GracefulShutdown
from sparkfn.connectors.source.runner import FINAL_STATES, SourceRunner
from waiting import until

WAIT_SECONDS = 15.0


@dataclass(frozen=True)
class Call:
    """One call into a source: its name, thread, and entry/exit sequence numbers."""

    name: str
    thread: str
    entered: int
    exited: int


class CallLog:
    """A thread-safe record of the calls made into a source."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self.calls: list[Call] = []
        self.active: dict[int, str] = {}  # entry number -> name, for calls in progress

    @contextmanager
    def call(self, name: str) -> Iterator[None]:
        with self._lock:
            entered = next(self._counter)
            self.active[entered] = name
        try:
            yield
        finally:
            with self._lock:
                exited = next(self._counter)
                del self.active[entered]
                self.calls.append(Call(name, threading.current_thread().name, entered, exited))

    def names(self) -> list[str]:
        with self._lock:
            return [c.name for c in sorted(self.calls, key=lambda c: c.entered)]

    def count(self, name: str) -> int:
        with self._lock:
            return sum(1 for c in self.calls if c.name == name)

    def assert_closed_once_and_last(self) -> None:
        """close() was called once, entered after every other call exited, and nothing followed."""
        with self._lock:
            closes = [c for c in self.calls if c.name == "close"]
            assert len(closes) == 1, f"close() called {len(closes)} times: {self.calls}"
            close = closes[0]
            others = [c for c in self.calls if c.name != "close"]
            assert not self.active, f"calls still in progress: {self.active}"
            late = [c for c in others if c.exited > close.entered]
            assert not late, f"calls returned after close() began: {late} (close {close})"
            after = [c for c in others if c.entered > close.exited]
            assert not after, f"calls made after close(): {after}"


# the shared bounded wait (tests/waiting.py), with this module's timeout
wait_until = partial(until, timeout=WAIT_SECONDS, every=0.01)


def finish(runner: SourceRunner, timeout: float = WAIT_SECONDS) -> None:
    """Wait for the runner to end and its thread to exit; fail if it does not."""
    assert runner.wait(timeout), f"{runner.name} did not end: {runner.state}, in {runner.in_call}"
    assert runner.join(timeout), f"{runner.name} thread still alive"
    assert runner.state in FINAL_STATES


class ScriptedSource(Source, GracefulShutdown):
    """A pull source driven by a script: a list of results for read(), then a default.

    Every call is logged; optional hooks let a test block or fail a call.
    """

    def __init__(
        self,
        script: list[Any] | None = None,
        *,
        then: Any = None,
        on_read: Callable[[ScriptedSource], None] | None = None,
        on_commit: Callable[[ScriptedSource], None] | None = None,
        on_ack: Callable[[ScriptedSource, Record], None] | None = None,
        final_records: list[Record] | None = None,
        fail_in: str | None = None,
    ) -> None:
        self.log = CallLog()
        self.script = list(script or [])
        self.then = then
        self.on_read = on_read
        self.on_commit = on_commit
        self.on_ack = on_ack
        self.final_records = final_records
        self.fail_in = fail_in
        self.context: SourceContext | None = None
        self.acked: list[Record] = []

    def _maybe_fail(self, name: str) -> None:
        if self.fail_in == name:
            raise ValueError(f"boom in {name}")

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        with self.log.call("open"):
            self.context = context
            self._maybe_fail("open")

    def read(self) -> Any:
        with self.log.call("read"):
            self._maybe_fail("read")
            if self.on_read is not None:
                self.on_read(self)
            if self.script:
                return self.script.pop(0)
            return self.then

    def ack(self, record: Record) -> None:
        with self.log.call("ack"):
            self._maybe_fail("ack")
            if self.on_ack is not None:
                self.on_ack(self, record)
            self.acked.append(record)

    def commit(self) -> None:
        with self.log.call("commit"):
            self._maybe_fail("commit")
            if self.on_commit is not None:
                self.on_commit(self)

    def prepare_to_shutdown(self) -> Any:
        with self.log.call("prepare_to_shutdown"):
            self._maybe_fail("prepare_to_shutdown")
            return self.final_records

    def shutdown(self) -> None:
        with self.log.call("shutdown"):
            self._maybe_fail("shutdown")

    def close(self) -> None:
        with self.log.call("close"):
            self._maybe_fail("close")


class ThreadedPushSource(PushSource, GracefulShutdown):
    """A push source whose reader thread emits ``count`` records, then optionally fails.

    ``close()`` stops and joins the reader thread, so no thread outlives the test.
    """

    def __init__(
        self,
        count: int = 0,
        *,
        fail_after: bool = False,
        interval: float = 0.0,
        block_after: bool = True,
    ) -> None:
        self.log = CallLog()
        self.count = count
        self.fail_after = fail_after
        self.interval = interval
        self.block_after = block_after
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.emitted = 0

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        with self.log.call("open"):
            self.thread = threading.Thread(target=self._produce, name="push-reader")
            self.thread.start()

    def _produce(self) -> None:
        for index in range(self.count):
            if self.stop_event.is_set():
                return
            self.emit(Record(f"push-{index}", sequence_id=index))
            self.emitted += 1
            if self.interval:
                time.sleep(self.interval)
        if self.fail_after:
            self.notify_error(ConnectionError("upstream went away"))
        if self.block_after:
            self.stop_event.wait()

    def ack(self, record: Record) -> None:
        with self.log.call("ack"):
            pass

    def commit(self) -> None:
        with self.log.call("commit"):
            pass

    def prepare_to_shutdown(self) -> Any:
        with self.log.call("prepare_to_shutdown"):
            # Emitted from the runner's thread: appended with the final flush.
            self.emit(Record("final-from-prepare"))
            return None

    def shutdown(self) -> None:
        with self.log.call("shutdown"):
            self.stop_event.set()

    def close(self) -> None:
        with self.log.call("close"):
            self.stop_event.set()
            if self.thread is not None:
                self.thread.join(WAIT_SECONDS)


def records(*values: Any) -> list[Record]:
    return [Record(v) for v in values]


class _StaticContext:
    """What a source's and a sink's context with fixed answers share."""

    def __init__(self, name: str = "archive", instance_id: int = 0, instances: int = 1) -> None:
        self.name = name
        self.instance_id = instance_id
        self.instances = instances
        self.fatals: list[BaseException] = []

    def get_name(self) -> str:
        return self.name

    def get_tenant(self) -> str:
        return "public"

    def get_namespace(self) -> str:
        return "default"

    def get_instance_id(self) -> int:
        return self.instance_id

    def get_num_instances(self) -> int:
        return self.instances

    def get_logger(self) -> logging.Logger:
        return logging.getLogger(f"connector.{self.name}")

    def get_secret(self, secret_name: str) -> str | None:
        return None

    def get_user_config_map(self) -> Mapping[str, Any]:
        return {}

    def record_metric(self, metric_name: str, metric_value: float) -> None:
        pass

    def fatal(self, exc: BaseException) -> None:
        self.fatals.append(exc)


class StaticSinkContext(_StaticContext, SinkContext):
    """A sink context with fixed answers: the built-in sinks exercised directly."""

    def get_input_topics(self) -> list[str]:
        return ["public/default/raw"]


class StaticSourceContext(_StaticContext, SourceContext):
    """A source context with fixed answers: a built-in source's open and read called
    directly; what it emits is kept in :attr:`emitted`."""

    def __init__(self, name: str = "archive", instance_id: int = 0, instances: int = 1) -> None:
        super().__init__(name, instance_id, instances)
        self.emitted: list[Record] = []

    def get_output_topic(self) -> str:
        return "public/default/raw"

    def emit(self, record: Record) -> None:
        self.emitted.append(record)
