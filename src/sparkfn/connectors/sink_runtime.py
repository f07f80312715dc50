"""Sinks on Spark: the adapter that runs a sink as a function's only object.

A sink needs what a function already has on Spark: a streaming query over its
input topics, instances, admission control, one commit per batch, stop modes,
``context.fatal`` from any thread, a failure policy and ``close()`` exactly
once. So a sink is run *as* a function: :func:`~sparkfn.connectors.sink.sink_config.sink_function_config`
turns a :class:`SinkConfig` into a :class:`FunctionConfig` whose code is
:class:`SinkFunction` (this module's adapter, found by its ``classname``),
and :class:`~sparkfn.connectors.sink.sink_run.SinkRun` runs it like ``FunctionRun``. Nothing else in
the function runtime knows it runs a sink.

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

**An exception from ``write`` fails that message**, as a function's
exception fails its message: it is negative-acked and delivered again after
``negative_ack_redelivery_delay_ms``, without end as in Pulsar unless
``max_message_retries`` is set, and after that many redeliveries it is
sent to the sink's dead-letter topic (``{tenant}/{namespace}/{name}-DLQ``
unless ``dead_letter_topic`` names one) with its cause in ``EXCEPTION``, and
the sink goes on with the next message. One bad message never stops a sink,
and none is dropped.

**An exception from ``flush`` fails the instance**: the batch is not
committed (so it is written again), the death is recorded (type, message,
traceback with a note naming the sink call) and the failure policy's
``on_failure`` applies (default ``REPLACE_INSTANCE``: restarted with backoff,
``SHUTDOWN_FUNCTION`` after ``max_restarts``), as Pulsar restarts a sink whose
writes fail. **Exceptions from ``open``, ``prepare_to_shutdown`` or
``shutdown`` are fatal**: passed to ``context.fatal`` (which fails the task at
once) and ``on_fatal`` applies (default ``SHUTDOWN_FUNCTION``: state
``ERROR``, no restart). The sink's own threads call ``SinkContext.fatal(exc)``
for the same effect. One exception: an ``open()`` that raises
``BrokerUnreachableError`` (the built-ins do while their broker is down, as
in its restart) fails the instance as a ``flush`` does: nothing of the task
is written (no message fails, none is dead-lettered), its end raises the
error, the batch stays uncommitted and ``on_failure`` opens a new instance
after its backoff.

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
from typing import Any, NoReturn

from sparkfn.api.connector import Record, Sink, SinkContext
from sparkfn.api.context import Context
from sparkfn.api.errors import BrokerUnreachableError, FatalError
from sparkfn.api.function import Function
from sparkfn.api.lifecycle import GracefulShutdown
from sparkfn.config.connector import SinkConfig
from sparkfn.connectors.registry import load_sink
from sparkfn.connectors.sink.sink_config import ADAPTER_CLASSNAME, SINK_CONFIG_KEY, embedded_sink
from sparkfn.runtime.function.context import FunctionContext
from sparkfn.runtime.function.rows import without_partition


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
        fqfn = "/".join(
            (
                context.get_function_tenant(),
                context.get_function_namespace(),
                context.get_function_name(),
            )
        )
        config = embedded_sink(context.get_user_config_value(SINK_CONFIG_KEY), fqfn)
        self.sink_config = config
        self.sink_context = _FunctionSinkContext(config, context)
        try:
            self.sink = load_sink(config, check=False)  # open() checks
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
            if isinstance(error, FatalError | BrokerUnreachableError):
                raise error  # a broker that is down: a failure, as a flush's
            self._fatal(error)
        if self.sink is None:  # initialize() did not run: a runtime bug
            msg = f"{ADAPTER_CLASSNAME}: called before initialize()"
            raise RuntimeError(msg)
        return self.sink

    def process(self, input: Any, context: Context) -> None:
        """``write`` the message as a :class:`Record`; an exception fails the message."""
        if isinstance(self._open_error, BrokerUnreachableError):
            return  # the task's end fails the instance; the batch is read again
        sink = self._check_open()
        message_id = context.get_message_id()
        record = Record(
            value=input,
            key=context.get_message_key() or None,  # a sink's record has None for none
            properties=context.get_message_properties(),
            event_time=context.get_message_eventtime() or None,
            # The topic's own name: the partition is the record's partition, below.
            topic=without_partition(context.get_current_message_topic_name()).removeprefix(
                "persistent://"
            ),
            message_id=None if message_id is None else str(message_id),
            partition=None if message_id is None else message_id.partition(),
        )
        try:
            sink.write(record)
        except FatalError:
            raise
        except Exception as exc:
            # A message error: the runtime retries it, then dead-letters it.
            if self.sink_config is not None:
                _note(exc, self.sink_config, "write()")
            raise
        if self.sink_context is not None:
            self.sink_context.hand_over_metrics()

    def sparkfn_end_task(self) -> None:
        """End of a task, before its batch commits: ``flush()``; an exception fails the
        instance (the failure policy's ``on_failure``), the batch uncommitted."""
        sink = self._check_open()
        try:
            sink.flush()
        except FatalError:
            raise
        except Exception as exc:
            if self.sink_config is not None:
                _note(exc, self.sink_config, "flush()")
            raise

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
