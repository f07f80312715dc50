"""How the ``localrun`` commands stop and run.

``functions``, ``sinks`` and ``sources`` stop the same way (SIGTERM in the
mode ``--sigterm`` names, the first Ctrl+C drains, the next stop signal
cancels, one more gives up waiting: :class:`StopSignals`) and report the same
way (plain lines on stderr, the final status as JSON on stdout:
:func:`finish`). Functions and sinks both run a Spark query through a run
object (:class:`QueryRun`); :func:`run_query` drives it. Their config comes
from :mod:`sparkfn.cli.configs`, their options from :mod:`sparkfn.cli.options`
and :mod:`sparkfn.cli.localrun`.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol, Self

import typer

from sparkfn.cli.context import console, emit_json, note
from sparkfn.cli.progress import REFRESH_SECONDS, Display, progress_display

if TYPE_CHECKING:
    from pydantic import BaseModel

    from sparkfn.api.status import FunctionStatus
    from sparkfn.config.function import FunctionConfig
    from sparkfn.store.store import Store


def stop_mode(text: str, flag: str = "--sigterm") -> str:
    """``drain``, ``suspend`` or ``cancel`` (any case); anything else is a usage error."""
    from sparkfn.api.lifecycle import StopMode

    mode = text.strip().lower()
    if mode not in set(StopMode):
        msg = f"{text!r} is not one of: {', '.join(StopMode)}"
        raise typer.BadParameter(msg, param_hint=f"'{flag}'")
    return mode


# --- stopping ---------------------------------------------------------------------


class StopSignals:
    """SIGTERM and SIGINT become stop requests; the main loop acts on them.

    SIGTERM asks for ``sigterm_mode``, the first SIGINT for a drain, the
    second signal of either kind for a cancel, and a third raises
    ``typer.Abort``: a source's runners are left to a ``read()`` that never
    returns; a query is still cancelled on the way out, then Spark stopped.
    The handlers only record: acting (taking a run's
    locks) from a handler could deadlock with the main thread holding one.
    """

    def __init__(self, sigterm_mode: str = "drain") -> None:
        self.sigterm_mode = sigterm_mode
        self.wake = threading.Event()
        self.requests: list[tuple[str, str]] = []  # (mode, signal name)
        self._taken = 0  # how many requests next_requests returned
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> Self:
        self.install()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    def install(self) -> None:
        """Take over both signals (again after SparkContext installed its SIGINT handler)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.signal(sig, self._handle)
            self._previous.setdefault(sig, previous)

    def restore(self) -> None:
        """Give the signals back to the handlers found by the first :meth:`install`."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    def request(self, mode: str, name: str) -> None:
        """Record a stop request as a signal would (for an interrupted JVM start)."""
        self.requests.append((mode, name))
        self.wake.set()

    def next_requests(self, timeout: float) -> list[tuple[str, str]]:
        """Wait up to ``timeout`` seconds for a stop request; the requests not returned before."""
        self.wake.wait(timeout)
        self.wake.clear()
        new = self.requests[self._taken :]
        self._taken += len(new)  # a handler may append meanwhile: that one comes next time
        return new

    def names(self) -> str:
        """The signals received, in order: ``SIGINT, SIGTERM``."""
        return ", ".join(name for _, name in self.requests)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if len(self.requests) >= 2:
            raise typer.Abort  # a third signal: stop waiting
        if self.requests:
            mode = "cancel"
        else:
            mode = self.sigterm_mode if signum == signal.SIGTERM else "drain"
        self.request(mode, name)


# --- running a query ----------------------------------------------------------------


class QueryRun(Protocol):
    """What :func:`run_query` needs of a run (``FunctionRun``, ``SinkRun``)."""

    @property
    def config(self) -> FunctionConfig: ...

    @property
    def store(self) -> Store: ...

    @property
    def spark(self) -> Any: ...

    @property
    def spark_master(self) -> str: ...

    @property
    def run_state(self) -> str: ...

    def start(self, *, until_drained: bool = False) -> Any: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    def stop(self, mode: str = "cancel", *, timeout: float | None = None) -> bool: ...

    def status(self) -> FunctionStatus: ...

    def lose(self, cause: str) -> None: ...


def run_query(
    run: QueryRun,
    label: str,
    starting: str,
    *,
    sigterm: str,
    until_drained: bool,
    metrics_port: int = 0,
) -> tuple[FunctionStatus, Exception | None]:
    """Start Spark and the run, show progress, act on stop signals, until the run ends.

    ``label`` names the run in every line (``function public/default/f``,
    ``sink public/default/s``); ``starting`` is the first line, after the
    metrics server (on ``metrics_port``, if not 0) is up. Returns the final
    status and the run's failure (``FunctionFailedError`` or
    ``ConnectorFailedError``), if it failed; whatever happens, nothing is
    left running and the signals are given back.
    """
    from sparkfn.api.errors import ConnectorFailedError, FunctionFailedError
    from sparkfn.runtime.spark.liveness import jvm_death

    failure: Exception | None = None
    shown: Display | None = None
    with ExitStack() as stack:
        signals = stack.enter_context(StopSignals(sigterm))
        if metrics_port:
            _serve_metrics(stack, run, metrics_port)
        note(starting)
        try:
            stack.callback(_stop_spark, start_spark(run, label))
        except KeyboardInterrupt:
            # Ctrl+C while pyspark's own handler was in place (the JVM was starting).
            signals.request("drain", "SIGINT")
        # Creating the SparkContext installed pyspark's SIGINT handler; take SIGINT back.
        signals.install()
        stack.callback(run.stop, "cancel")  # whatever happens below, nothing keeps running
        if signals.requests:
            note(f"stopped {label} before it started ({signals.names()})")
            return run.status(), None
        logged = _function_logs(run)  # this run's lines of context.get_logger(), for the console
        try:
            earlier = run.status()  # the store's counts of earlier runs: not this run's
            run.start(until_drained=until_drained)
            shown = progress_display(console(stderr=True), run.config, since=earlier)
            stack.callback(shown.close, None)
            while not run.wait(timeout=0):  # raises the failure if the run failed
                for mode, name in signals.next_requests(REFRESH_SECONDS):
                    note(f"stopping {label}: {mode} ({name})")
                    run.stop(mode, timeout=0)
                _show_logs(logged, shown)
                shown.update(run.status())
                if (died := jvm_death()) is not None:  # the run cannot go on: it ends in ERROR
                    run.lose(died)
        except (FunctionFailedError, ConnectorFailedError) as exc:
            failure = exc
        status = run.status()
        if shown is not None:
            _show_logs(logged, shown)
            shown.close(status)
    if signals.requests and failure is None:
        note(f"stopped {label} ({signals.names()}): {run.run_state}")
    return status, failure


def _function_logs(run: QueryRun) -> Iterator[str | None] | None:
    """The lines a function run logs from now on (none for a sink): its instances' log files."""
    from sparkfn.runtime.function.logs import follow
    from sparkfn.runtime.function_run import FunctionRun

    if not isinstance(run, FunctionRun) or run.kind != "function":
        return None
    lines = follow(run.store.data_dir, run.config.fqfn, from_start=False, poll=0)
    while next(lines) is not None:  # what earlier runs logged is skipped
        pass
    return lines


def _show_logs(lines: Iterator[str | None] | None, shown: Display) -> None:
    """Print the lines logged since the last look."""
    if lines is None:
        return
    while (line := next(lines)) is not None:
        shown.log(line)


def _serve_metrics(stack: ExitStack, run: QueryRun, port: int) -> None:
    """Serve the run's Prometheus metrics until ``stack`` closes.

    Started before the JVM, so that a busy port costs nothing.
    """
    from sparkfn.runtime.prometheus import serve_metrics

    server = serve_metrics(port, run.store, run.config)
    stack.callback(server.close)
    note(f"serving metrics of {run.config.fqfn} on port {server.port} (/metrics)")


def finish(status: BaseModel, failure: Exception | None, *, json_status: bool) -> None:
    """A run's last words: its final status as a JSON line on stdout if asked, then its failure."""
    if json_status:
        emit_json(status.model_dump(by_alias=True, mode="json"))
    if failure is not None:
        raise failure


def start_spark(run: QueryRun, label: str) -> Any:
    """The run's SparkSession, started now; a failure to start is one error line."""
    from sparkfn.api.errors import SparkfnError

    try:
        return run.spark
    except Exception as exc:  # Py4J and Spark errors: a bad master URL, no Java, ...
        lines = str(exc).strip().splitlines()
        shown = lines[0] if lines else type(exc).__name__
        msg = f"{label}: cannot start Spark on {run.spark_master}: {shown}"
        raise SparkfnError(msg) from exc


def _stop_spark(spark: Any) -> None:
    from sparkfn.runtime.spark.liveness import forget_session, jvm_death

    if jvm_death() is not None:  # nothing to stop: the JVM is gone
        forget_session(spark)
        return
    try:
        spark.stop()
    except Exception as exc:  # the run is over; a failing stop must not hide its result
        sys.stderr.write(f"warning: stopping Spark failed: {exc}\n")
