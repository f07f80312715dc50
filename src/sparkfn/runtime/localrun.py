"""Running one function in the foreground, on a local SparkSession or a given master.

>>> config = FunctionConfig.build(name="exclaim", py="examples/exclamation.py",
...                               inputs=["in"], output="out")
>>> with LocalRun(config, store=store) as run:
...     run.start(until_drained=True)   # process what is there, then stop
...     run.wait(timeout=120)
...     print(run.status())

``localrun`` on the CLI is this class plus live output. It is the same query
a worker runs; only the process around it differs.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any

from pyspark.errors import StreamingQueryException

from sparkfn.api.errors import FunctionFailedError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.query import start_function_query, validate
from sparkfn.runtime.spark import spark_session
from sparkfn.runtime.status import InstanceRunInfo, RunInfo, function_stats, function_status
from sparkfn.state.buffer import CommittedState
from sparkfn.state.store import all_state, get_state
from sparkfn.store.store import Store


class LocalRun:
    """One function's query, started and watched from this process."""

    def __init__(
        self,
        config: FunctionConfig,
        *,
        store: Store | None = None,
        data_dir: str | Path | None = None,
        store_url: str | None = None,
        spark_master: str = "local[*]",
        spark: Any = None,
    ) -> None:
        self.config = config
        self._own_store = store is None
        self.store = store or Store.open(store_url, data_dir)
        self.spark_master = spark_master
        self._spark = spark
        self.query: Any = None
        self.run = RunInfo({i: InstanceRunInfo() for i in range(config.parallelism)})

    @property
    def spark(self) -> Any:
        """The SparkSession (created on first use)."""
        if self._spark is None:
            self._spark = spark_session(
                master=self.spark_master,
                app_name=f"sparkfn {self.config.fqfn}",
                conf=self.config.spark_conf,
            )
        return self._spark

    def start(self, *, until_drained: bool = False, checkpoint: Path | None = None) -> LocalRun:
        """Validate and start the query; with ``until_drained`` it stops when input is exhausted."""
        self._set_state("STARTING", running=False)
        try:
            # Fail on bad topics or code before paying for a JVM.
            validate(self.store, self.config)
            self.query = start_function_query(
                self.spark,
                self.store,
                self.config,
                until_drained=until_drained,
                checkpoint=checkpoint,
            )
        except Exception as exc:
            self._set_state("ERROR", running=False, error=str(exc))
            raise
        self._set_state("RUNNING", running=True)
        return self

    def _set_state(self, state: str, *, running: bool, error: str = "") -> None:
        for info in self.run.instances.values():
            info.state = state
            info.running = running
            info.error = error

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the query to end; True if it ended. Raises :class:`FunctionFailedError` on failure."""
        if self.query is None:
            return True
        try:
            if timeout is None:
                self.query.awaitTermination()
                ended = True
            else:
                ended = bool(self.query.awaitTermination(timeout))
        except StreamingQueryException:
            # awaitTermination raises the query's failure; _finish reports it as ours.
            ended = True
        if ended:
            self._finish()
        return ended

    def _finish(self) -> None:
        error = self.query.exception() if self.query is not None else None
        if error is not None:
            text = _short_error(str(error))
            self._set_state("ERROR", running=False, error=text)
            msg = f"function {self.config.fqfn} failed: {text}"
            raise FunctionFailedError(msg)
        self._set_state("STOPPED", running=False)

    def wait_for(self, predicate: Any, timeout: float, what: str) -> None:
        """Poll ``predicate()`` until true; fail naming ``what`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.query is not None and not self.query.isActive:
                self.wait(0)
            if time.monotonic() > deadline:
                msg = f"function {self.config.fqfn}: {what} did not happen within {timeout} s"
                raise TimeoutError(msg)
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the query (idempotent)."""
        if self.query is not None and self.query.isActive:
            self._set_state("STOPPING", running=True)
            self.query.stop()
        if self.query is not None:
            self._set_state("STOPPED", running=False)

    def status(self) -> dict[str, Any]:
        """Pulsar ``FunctionStatus`` JSON."""
        if self.query is not None and not self.query.isActive:
            error = self.query.exception()
            state = "ERROR" if error is not None else "STOPPED"
            self._set_state(state, running=False, error=_short_error(str(error)) if error else "")
        return function_status(self.store, self.config.fqfn, self.config.parallelism, self.run)

    def stats(self) -> dict[str, Any]:
        """Pulsar ``FunctionStats`` JSON."""
        return function_stats(self.store, self.config.fqfn, self.config.parallelism)

    def get_counter(self, key: str) -> int:
        """A committed counter of the function."""
        found = get_state(self.store, self.config.fqfn, key)
        return (found.counter or 0) if found else 0

    def get_state(self, key: str) -> bytes | None:
        """A committed state value of the function."""
        found = get_state(self.store, self.config.fqfn, key)
        return found.value if found else None

    def state(self) -> dict[str, CommittedState]:
        """All committed state of the function."""
        return all_state(self.store, self.config.fqfn)

    def close(self) -> None:
        """Stop, and close the store if this run opened it."""
        self.stop()
        if self._own_store:
            self.store.close()

    def __enter__(self) -> LocalRun:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _short_error(text: str) -> str:
    """The user-facing part of a Spark error: sparkfn's message if it is in there."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("sparkfn.", "function ")) or "Error: function " in stripped:
            return stripped
    # A Python worker's failure: its exception is the first unindented line
    # after the frames of the last traceback ("RuntimeError: db unreachable").
    _, marker, frames = text.rpartition("Traceback (most recent call last):")
    if marker:
        for line in frames.splitlines()[1:]:
            if line.strip() and not line[0].isspace():
                return line.strip()
    first = text.strip().splitlines()
    return first[0] if first else text
