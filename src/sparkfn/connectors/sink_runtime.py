"""Sinks on Spark: a sink runs as a function whose only object is the sink.

A sink needs what a function already has on Spark: a streaming query over its
input topics, instances, admission control, one commit per batch, stop modes,
``context.fatal`` from any thread, a failure policy and ``close()`` exactly
once. So a sink is run *as* a function: :func:`sink_function_config` turns a
:class:`SinkConfig` into a :class:`FunctionConfig` whose code is
:class:`SinkFunction` (an adapter, found by its ``classname``) and whose
``user_config[SINK_CONFIG_KEY]`` (``"__sparkfn_sink__"``) holds the whole sink
config as JSON (``SinkConfig.model_dump(mode="json")``; a ``py`` path made
absolute). Nothing else in the function runtime knows it runs a sink.

>>> config = sink_function_config(SinkConfig(name="archive", sink_type="file",
...     inputs=["raw"], configs={"path": "/data/out-{instance}.jsonl"}))
>>> config.classname
'sparkfn.connectors.sink_runtime.SinkFunction'
>>> with SinkRun(SinkConfig(...), store=store) as run:    # like LocalRun
...     run.start(until_drained=True).wait(120)

How the adapter maps the sink's calls onto a function object's lifecycle
(DESIGN.md 2.3; one adapter, so one sink object, per instance per Spark
Python worker process):

========================  ==================================================
function object           sink
========================  ==================================================
``initialize(context)``   load the sink's code, ``open(configs, context)``
``process(input, ctx)``   ``write(Record)``: ``value`` decoded per the topic
                          schema (what a function gets), ``key``,
                          ``properties``, ``event_time`` (ms), ``topic``
                          (``tenant/ns/name``), ``message_id``
                          (``partition:offset``), ``partition``
``sparkfn_end_task()``    ``flush()``, at the end of every task, before the
                          batch commits
``prepare_to_shutdown``,  forwarded when the sink has them (drain, suspend);
``shutdown``              on drain the final batch's ``flush()`` follows
                          ``prepare_to_shutdown()``
``close()``               ``close()``: exactly once, last, by the runtime
========================  ==================================================

**Exceptions from the sink are fatal**, not message errors: one raised by
``open``, ``write``, ``flush``, ``prepare_to_shutdown`` or ``shutdown`` is
passed to ``context.fatal`` (which fails the task at once), so the instance
is terminated, its death recorded (type, message, traceback with a note
naming the sink call, thread) and the failure policy's ``on_fatal`` applies
(default ``SHUTDOWN_FUNCTION``: state ``ERROR``, no restart). The sink's own
threads call ``SinkContext.fatal(exc)`` for the same effect.

When ``open()`` raises, the sink is closed all the same (as sources are, and
as Pulsar IO does): the adapter completes ``initialize`` and reports the
error at its first call in the same task, so the runtime's one ``close()``
reaches the sink. Nothing but ``close()`` is called on it after a failed
``open``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

from sparkfn.api.connector import Record, Sink, SinkContext
from sparkfn.api.context import Context
from sparkfn.api.errors import ConfigError, ConnectorFailedError, FatalError, FunctionFailedError
from sparkfn.api.function import Function
from sparkfn.api.lifecycle import GracefulShutdown
from sparkfn.api.status import FunctionStats, FunctionStatus
from sparkfn.config.connector import SinkConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.connectors.registry import load_sink
from sparkfn.runtime.function.context import FunctionContext
from sparkfn.store.store import Store

SINK_CONFIG_KEY = "__sparkfn_sink__"
"""The ``user_config`` key of a sink's function config that holds the sink's config."""

ADAPTER_CLASSNAME = "sparkfn.connectors.sink_runtime.SinkFunction"
"""The ``classname`` of every sink's function config."""


def sink_function_config(sink: SinkConfig) -> FunctionConfig:
    """The function config that runs ``sink`` on Spark.

    It has the sink's name, inputs, parallelism, guarantees, failure policy,
    subscription position, batch cap, trigger interval and secrets, no
    output, and :class:`SinkFunction` for code; the sink's config rides in
    ``user_config[SINK_CONFIG_KEY]``.
    """
    if sink.py:
        # Absolute, so that Spark's Python workers find it whatever their directory.
        sink = sink.model_copy(update={"py": str(Path(sink.py).expanduser().resolve())})
    return FunctionConfig.build(
        tenant=sink.tenant,
        namespace=sink.namespace,
        name=sink.name,
        classname=ADAPTER_CLASSNAME,
        inputs=list(sink.inputs),
        output=None,
        parallelism=sink.parallelism,
        processing_guarantees=sink.processing_guarantees,
        failure_policy=sink.failure_policy,
        subscription_position=sink.subscription_position,
        max_records_per_batch=sink.max_records_per_batch,
        trigger_interval=sink.trigger_interval,
        secrets=dict(sink.secrets),
        user_config={SINK_CONFIG_KEY: sink.model_dump(mode="json")},
    )


def sink_config_of(config: FunctionConfig) -> SinkConfig:
    """The sink config a function config made by :func:`sink_function_config` carries."""
    return _embedded_sink(config.user_config.get(SINK_CONFIG_KEY), config.fqfn)


def _embedded_sink(embedded: Any, fqfn: str) -> SinkConfig:
    if not isinstance(embedded, Mapping):
        msg = (
            f"function {fqfn}: {ADAPTER_CLASSNAME} runs sinks only; its user_config has no "
            f"{SINK_CONFIG_KEY!r} (make the config with sink_function_config)"
        )
        raise ConfigError(msg)
    built: SinkConfig = SinkConfig.build(**dict(embedded))
    return built


def validate_sink(store: Store, sink: SinkConfig) -> None:
    """Everything that can be checked before Spark starts, as a :class:`ConfigError`
    naming the sink, the field and the value: the input topics exist, the code
    loads (a built-in ``sink_type`` exists; a ``py`` file imports; a
    ``classname`` names a :class:`Sink` class that can be created)."""
    from sparkfn.api.errors import TopicNotFoundError
    from sparkfn.topics.admin import TopicAdmin

    admin = TopicAdmin(store)
    for topic in sink.inputs:
        try:
            admin.get(topic)
        except TopicNotFoundError:
            msg = f"sink {sink.fqn}: inputs topic {topic} does not exist; create it first"
            raise ConfigError(msg) from None
    load_sink(sink)


# --- the adapter, in Spark's Python workers ------------------------------------------------


class _FunctionSinkContext(SinkContext):
    """A sink's context on top of the function context of its adapter."""

    def __init__(self, sink: SinkConfig, context: Context) -> None:
        self._sink = sink
        self._context = context
        self._logger = logging.getLogger(f"sparkfn.sink.{sink.fqn}.{context.get_instance_id()}")
        # record_metric may come from any thread, the function context takes
        # metrics on the task thread inside process(): they wait here until then.
        self._metrics: list[tuple[str, float]] = []
        self._metrics_lock = threading.Lock()

    def get_name(self) -> str:
        """The sink's name."""
        return self._sink.name

    def get_tenant(self) -> str:
        """The sink's tenant."""
        return self._sink.tenant

    def get_namespace(self) -> str:
        """The sink's namespace."""
        return self._sink.namespace

    def get_instance_id(self) -> int:
        """This instance's id."""
        return self._context.get_instance_id()

    def get_num_instances(self) -> int:
        """The sink's parallelism."""
        return self._context.get_num_instances()

    def get_logger(self) -> logging.Logger:
        """``sparkfn.sink.<tenant/ns/name>.<instance>``."""
        return self._logger

    def get_secret(self, secret_name: str) -> str | None:
        """A secret named in the sink's ``secrets``, resolved as functions resolve theirs."""
        return self._context.get_secret(secret_name)

    def get_user_config_map(self) -> Mapping[str, Any]:
        """The sink's ``configs``."""
        return dict(self._sink.configs)

    def record_metric(self, metric_name: str, metric_value: float) -> None:
        """Observe a user metric value (counted with the next record written)."""
        with self._metrics_lock:
            self._metrics.append((metric_name, float(metric_value)))

    def fatal(self, exc: BaseException) -> None:
        """Terminate this instance (PIP-297): the function context's ``fatal``."""
        self._context.fatal(exc)

    def get_input_topics(self) -> list[str]:
        """The sink's input topics (``tenant/namespace/name``)."""
        return list(self._sink.inputs)

    def hand_over_metrics(self) -> None:
        """Pass the metrics recorded so far to the function context (task thread only)."""
        if not self._metrics:
            return
        with self._metrics_lock:
            metrics, self._metrics = self._metrics, []
        for name, value in metrics:
            self._context.record_metric(name, value)


class SinkFunction(Function, GracefulShutdown):
    """The function object that runs a sink; see the module docstring.

    Constructed with no arguments by the function loader; the sink's config
    comes from ``user_config[SINK_CONFIG_KEY]`` in :meth:`initialize`.
    """

    def __init__(self) -> None:
        self.sink: Sink | None = None
        self.sink_config: SinkConfig | None = None
        self.sink_context: _FunctionSinkContext | None = None
        self.context: Context | None = None
        self._open_error: BaseException | None = None

    def initialize(self, context: Context) -> None:
        """Load the sink's code and ``open`` it (a failing ``open`` is reported at the next call)."""
        self.context = context
        config = _embedded_sink(
            context.get_user_config_value(SINK_CONFIG_KEY), context.get_function_id()
        )
        self.sink_config = config
        self.sink_context = _FunctionSinkContext(config, context)
        try:
            self.sink = load_sink(config)
        except Exception as exc:
            self._fatal(exc, "loading the code")
        try:
            self.sink.open(dict(config.configs), self.sink_context)
        except Exception as exc:
            # Not raised here: initialize() must complete for the runtime to
            # close() the sink. The task's next call reports it (a FatalError:
            # the sink called context.fatal itself, which recorded the death).
            if not isinstance(exc, FatalError):
                _note(exc, config, "open()")
            self._open_error = exc

    def _check_open(self) -> Sink:
        """The opened sink; if ``open()`` failed, terminate the instance instead."""
        error = self._open_error
        if error is not None:
            if isinstance(error, FatalError):
                raise error
            self._fatal(error)
        if self.sink is None:  # initialize() did not run: a runtime bug
            msg = f"{ADAPTER_CLASSNAME}: called before initialize()"
            raise RuntimeError(msg)
        return self.sink

    def process(self, input: Any, context: Context) -> None:
        """``write`` the message as a :class:`Record`; a failure is fatal."""
        sink = self._check_open()
        message_id = context.get_message_id()
        record = Record(
            value=input,
            key=context.get_message_key(),
            properties=context.get_message_properties(),
            event_time=context.get_message_eventtime(),
            topic=context.get_current_message_topic_name().removeprefix("persistent://"),
            message_id=None if message_id is None else str(message_id),
            partition=None if message_id is None else message_id.partition(),
        )
        try:
            sink.write(record)
        except FatalError:
            raise
        except Exception as exc:
            self._fatal(exc, "write()")
        if self.sink_context is not None:
            self.sink_context.hand_over_metrics()

    def sparkfn_end_task(self) -> None:
        """End of a task, before its batch commits: ``flush()``; a failure is fatal."""
        sink = self._check_open()
        try:
            sink.flush()
        except FatalError:
            raise
        except Exception as exc:
            self._fatal(exc, "flush()")

    def prepare_to_shutdown(self) -> None:
        """Forward ``prepare_to_shutdown()`` (drain, suspend) if the sink has it."""
        self._check_open()
        self._forward("prepare_to_shutdown")

    def shutdown(self) -> None:
        """Forward ``shutdown()`` (drain, suspend) if the sink has it."""
        if self._open_error is None:
            self._forward("shutdown")

    def close(self) -> None:
        """``close()`` the sink: the runtime calls this exactly once, last."""
        if self.sink is not None:
            self.sink.close()

    def _forward(self, name: str) -> None:
        method = getattr(self.sink, name, None)
        if not callable(method):
            return
        try:
            method()
        except FatalError:
            raise
        except Exception as exc:
            self._fatal(exc, f"{name}()")

    def _fatal(self, exc: BaseException, call: str | None = None) -> NoReturn:
        """Terminate the instance with ``exc``. On the task thread ``context.fatal``
        raises; elsewhere (the control thread's ``shutdown``) ``exc`` is re-raised."""
        if call is not None and self.sink_config is not None:
            _note(exc, self.sink_config, call)
        if isinstance(self.context, FunctionContext):
            self.context.fatal_from("connector", exc)
        elif self.context is not None:
            self.context.fatal(exc)
        raise exc


def _note(exc: BaseException, sink: SinkConfig, call: str) -> None:
    """Say in the exception (and so in the stored death traceback) which sink call raised it."""
    note = f"raised by {call} of sink {sink.fqn}"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


# --- running a sink like LocalRun -------------------------------------------------------


class SinkRun:
    """One sink's query, started and watched from this process, like :class:`LocalRun`.

    >>> with SinkRun(SinkConfig.build(name="archive", sink_type="file", inputs=["raw"],
    ...                               configs={"path": "/tmp/out.jsonl"}), store=store) as run:
    ...     run.start(until_drained=True)
    ...     run.wait(timeout=120)            # raises ConnectorFailedError if it died
    ...     run.status().state
    <RunState.STOPPED: 'STOPPED'>

    Stop modes, status, stats and transitions are the function runtime's
    (``run.local`` is the :class:`LocalRun`); failures are reported as
    :class:`ConnectorFailedError` naming the sink.
    """

    def __init__(
        self,
        sink: SinkConfig,
        *,
        store: Store | None = None,
        data_dir: str | Path | None = None,
        store_url: str | None = None,
        spark_master: str = "local[*]",
        spark: Any = None,
    ) -> None:
        from sparkfn.runtime.localrun import LocalRun

        self.sink = sink
        self.config = sink_function_config(sink)
        self.local = LocalRun(
            self.config,
            store=store,
            data_dir=data_dir,
            store_url=store_url,
            spark_master=spark_master,
            spark=spark,
            kind="sink",
        )

    @property
    def store(self) -> Store:
        """The store the sink runs on."""
        return self.local.store

    @property
    def spark(self) -> Any:
        """The SparkSession (created on first use)."""
        return self.local.spark

    @property
    def spark_master(self) -> str:
        """The Spark master URL."""
        return self.local.spark_master

    @property
    def query(self) -> Any:
        """The running ``StreamingQuery``, if started."""
        return self.local.query

    def start(self, *, until_drained: bool = False, checkpoint: Path | None = None) -> SinkRun:
        """Validate (topics, the sink's code) and start; ``until_drained``: write what is there, then stop."""
        try:
            validate_sink(self.store, self.sink)
        except Exception as exc:
            self.local.record_start_error(exc)
            raise
        try:
            self.local.start(until_drained=until_drained, checkpoint=checkpoint)
        except FunctionFailedError as exc:
            raise self._failed(exc) from None
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the run to end; True if it ended. Raises :class:`ConnectorFailedError` if it ended in ERROR."""
        try:
            return self.local.wait(timeout)
        except FunctionFailedError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: FunctionFailedError) -> ConnectorFailedError:
        text = str(exc)
        prefix = f"function {self.config.fqfn}"
        if text.startswith(prefix):
            text = f"sink {self.sink.fqn}" + text[len(prefix) :]
        return ConnectorFailedError(text)

    @property
    def run_state(self) -> str:
        """The sink's state (``CREATED`` before the first start)."""
        return self.local.run_state

    def stop(self, mode: str = "cancel", *, timeout: float | None = None) -> bool:
        """Stop the run (``drain``, ``suspend`` or ``cancel``); idempotent. True once ended."""
        return self.local.stop(mode, timeout=timeout)

    def drain(self, timeout: float | None = None) -> bool:
        """Write everything present now, ``prepare_to_shutdown``, ``shutdown``, ``close``; ``STOPPED``."""
        return self.local.drain(timeout)

    def suspend(self, timeout: float | None = None) -> bool:
        """Stop admitting input, finish the batch in flight, shut down gracefully; ``SUSPENDED``."""
        return self.local.suspend(timeout)

    def cancel(self, timeout: float | None = None) -> bool:
        """Stop now; the batch in flight is abandoned (written again per the guarantee); ``close`` only."""
        return self.local.cancel(timeout)

    def status(self) -> FunctionStatus:
        """Pulsar's ``FunctionStatus`` shape, with ``state`` and ``deathException`` per instance."""
        return self.local.status()

    def stats(self) -> FunctionStats:
        """Pulsar's ``FunctionStats`` shape (``processed_successfully_total``: records written)."""
        return self.local.stats()

    def transitions(self) -> list[dict[str, Any]]:
        """Every recorded state transition of the sink and its instances."""
        return self.local.transitions()

    def close(self) -> None:
        """Cancel the run if it still runs, and close the store if this run opened it."""
        self.local.close()

    def __enter__(self) -> SinkRun:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
