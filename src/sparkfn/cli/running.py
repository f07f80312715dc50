"""What the ``localrun`` commands share.

``functions``, ``sinks`` and ``sources`` take their config the same way
(flags as text, over an optional YAML file, validated by the config model so
every bad value is reported alike), stop the same way (SIGTERM in the mode
``--sigterm`` names, the first Ctrl+C drains, the next stop signal cancels,
one more gives up waiting) and report the same way (plain lines on stderr,
the final status as JSON on stdout). Functions and sinks both run a Spark
query through a run object (:class:`QueryRun`); :func:`run_query` drives it.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, Protocol, Self, TypeVar

import typer

if TYPE_CHECKING:
    from sparkfn.api.status import FunctionStatus


class _Config(Protocol):
    """What the function, source and sink configs have in common here."""

    @property
    def py(self) -> str | None: ...

    @classmethod
    def from_yaml(cls, path: Path, **overrides: Any) -> Self: ...

    @classmethod
    def build(cls, **fields: Any) -> Self: ...

    def model_copy(self, *, update: dict[str, Any]) -> Self: ...


ConfigT = TypeVar("ConfigT", bound=_Config)

SPARK_MASTER_ENV = "SPARKFN_SPARK_MASTER"

# Pulsar spells some enum values differently; the configs take sparkfn's.
_PULSAR_SPELLINGS = {"atleast_once": "at_least_once", "atmost_once": "at_most_once"}


def option(flag: str, help_text: str, panel: str, metavar: str | None = None) -> Any:
    """A ``typer.Option`` in a help panel: the shape of every config flag."""
    return typer.Option(flag, help=help_text, rich_help_panel=panel, metavar=metavar)


def note(text: str) -> None:
    """One line on stderr, plain: stderr may be a log file, where Rich would wrap."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def elapsed(started: float) -> str:
    """``H:MM:SS`` since ``started`` (a ``time.monotonic()`` reading)."""
    seconds = int(time.monotonic() - started)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# --- the "Run" options all three commands take ------------------------------------

RUN_PANEL = "Run"

# Taken as text and validated by the config, like every config field.
Parallelism = Annotated[
    str | None, option("--parallelism", "Number of instances (1 to 256).", RUN_PANEL, "N")
]
TriggerInterval = Annotated[
    str | None,
    option(
        "--trigger-interval",
        "Time between micro-batches: 500ms, 2s, 1m (default: as fast as possible).",
        RUN_PANEL,
        "DURATION",
    ),
]
FailurePolicyOption = Annotated[
    str | None,
    option(
        "--failure-policy",
        "What happens after an instance dies, as a JSON object: on_failure, on_fatal, "
        "handler, max_restarts, restart_window, backoff_initial, ... (docs/lifecycle.md).",
        RUN_PANEL,
        "JSON",
    ),
]
SparkMaster = Annotated[
    str,
    typer.Option(
        "--spark-master",
        envvar=SPARK_MASTER_ENV,
        show_envvar=True,
        help="Spark master URL.",
        rich_help_panel=RUN_PANEL,
        metavar="URL",
    ),
]
Sigterm = Annotated[
    str,
    typer.Option(
        "--sigterm",
        help="How SIGTERM stops the run: drain, suspend or cancel. Ctrl+C drains; "
        "a second stop signal cancels.",
        rich_help_panel=RUN_PANEL,
        metavar="MODE",
    ),
]


# --- reading flag values ----------------------------------------------------------


def stop_mode(text: str, flag: str = "--sigterm") -> str:
    """``drain``, ``suspend`` or ``cancel`` (any case); anything else is a usage error."""
    from sparkfn.api.lifecycle import StopMode

    mode = text.strip().lower()
    if mode not in set(StopMode):
        msg = f"{text!r} is not one of: {', '.join(StopMode)}"
        raise typer.BadParameter(msg, param_hint=f"'{flag}'")
    return mode


def split_topics(values: list[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` → ``["a", "b", "c"]``; nothing given → ``None``."""
    if not values:
        return None
    return [topic.strip() for value in values for topic in value.split(",") if topic.strip()]


def mapping(text: str | None) -> Any:
    """A JSON or YAML object as a dict; anything else unchanged, for the config to reject."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        import yaml

        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            return text
    return value if isinstance(value, dict) else text


def enum_value(text: Any, allowed: Iterable[str]) -> Any:
    """``Shared``, ``ATLEAST_ONCE``, ``key-shared`` → sparkfn's value; unknown text unchanged."""
    if not isinstance(text, str):
        return text
    value = text.strip().lower().replace("-", "_")
    value = _PULSAR_SPELLINGS.get(value, value)
    return value if value in set(allowed) else text


def config_fields(
    fields: Mapping[str, Any],
    *,
    integers: Iterable[str] = (),
    enums: Mapping[str, Iterable[str]] | None = None,
) -> dict[str, Any]:
    """The flags that were given, with numbers as numbers and enum spellings normalised.

    A number reads as one in the config's error ("(got 0)", not "(got '0')");
    text that is not a number or a known value is left for the config to
    reject by name.
    """
    given = {k: v for k, v in fields.items() if v is not None}
    for key in integers:
        value = given.get(key)
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            given[key] = int(value)
    for key, allowed in (enums or {}).items():
        if key in given:
            given[key] = enum_value(given[key], allowed)
    return given


def default_name(fields: dict[str, Any], config_file: Path | None, type_key: str = "") -> None:
    """Name the function or connector as Pulsar does when neither flags nor file do.

    After the last part of the class name, else (sparkfn) the ``--py`` file's
    name, else the built-in connector type (``type_key``: ``source_type``).
    """
    if fields.get("name"):
        return
    from_file = _peek_yaml(config_file) if config_file else {}
    if from_file.get("name"):
        return

    def given(key: str, camel: str = "") -> Any:
        first, *rest = key.split("_")
        camel = camel or first + "".join(word.title() for word in rest)  # Pulsar's spelling
        return fields.get(key) or from_file.get(key) or from_file.get(camel)

    classname, py = given("classname", "className"), given("py")
    kind = given(type_key) if type_key else None
    if isinstance(classname, str) and classname.strip():
        derived = classname.strip().rpartition(".")[2]
    elif isinstance(py, str) and py.strip():
        derived = Path(py.strip()).stem
    elif isinstance(kind, str) and kind.strip():
        derived = kind.strip()
    else:
        return
    if derived:
        fields["name"] = derived


def _peek_yaml(path: Path) -> dict[str, Any]:
    """The file's top-level mapping, or nothing: reading it for real reports its errors."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def load_config(model: type[ConfigT], fields: dict[str, Any], config_file: Path | None) -> ConfigT:
    """``model`` from the flags' ``fields`` over ``config_file``, with ``py`` made absolute.

    Absolute, so that Spark's Python workers find the code from any directory.
    """
    if config_file is not None:
        config = model.from_yaml(config_file, **fields)
    else:
        config = model.build(**fields)
    if not config.py:
        return config
    return config.model_copy(update={"py": str(Path(config.py).expanduser().resolve())})


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
        self._previous: dict[signal.Signals, Any] = {}

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
    """What :func:`run_query` needs of a run (``LocalRun``, ``SinkRun``)."""

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


class Display(Protocol):
    """Progress on stderr while a run goes."""

    def update(self, status: FunctionStatus) -> None:
        """Show the status now (or when it is time to)."""

    def close(self, status: FunctionStatus | None) -> None:
        """Show the final status, if given, and finish; later calls do nothing."""


def run_query(
    run: QueryRun,
    *,
    label: str,
    signals: StopSignals,
    until_drained: bool,
    display: Callable[[], Display],
    failure_type: type[Exception],
    refresh_seconds: float = 1.0,
) -> tuple[FunctionStatus, Exception | None]:
    """Start Spark and the run, show progress, act on stop signals, until the run ends.

    ``label`` names the run in every line (``public/default/f``, ``sink
    public/default/s``). Returns the final status and the run's failure (an
    instance of ``failure_type``), if it failed; whatever happens, nothing is
    left running. The caller installs ``signals`` before calling.
    """
    failure: Exception | None = None
    shown: Display | None = None
    with ExitStack() as stack:
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
        try:
            run.start(until_drained=until_drained)
            shown = display()
            stack.callback(shown.close, None)
            acted = 0
            while not run.wait(timeout=0):  # raises failure_type if the run failed
                signals.wake.wait(refresh_seconds)
                signals.wake.clear()
                while acted < len(signals.requests):
                    mode, name = signals.requests[acted]
                    acted += 1
                    note(f"stopping {label}: {mode} ({name})")
                    run.stop(mode, timeout=0)
                shown.update(run.status())
        except failure_type as exc:
            failure = exc
        status = run.status()
        if shown is not None:
            shown.close(status)
    if signals.requests and failure is None:
        note(f"stopped {label} ({signals.names()}): {run.run_state}")
    return status, failure


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
    try:
        spark.stop()
    except Exception as exc:  # the run is over; a failing stop must not hide its result
        sys.stderr.write(f"warning: stopping Spark failed: {exc}\n")
