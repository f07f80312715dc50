"""Unit-testing a function without Spark: :class:`FunctionHarness`.

The harness drives the same per-message engine the Spark runtime runs
(:class:`~sparkfn.runtime.function.instance.FunctionInstance`), so retries, dead
letters, "a failed message leaves no trace", state read-your-writes and
metrics behave as they do in a real run. What it replaces is only what is
around the engine: topics are in-memory lists (:mod:`.topics`), state is
an in-memory dict (:mod:`.state`), and each :meth:`FunctionHarness.send`
(or :meth:`~FunctionHarness.send_many`) is one batch that commits when it
returns.

>>> def exclaim(input):
...     return input + "!"
>>> harness = FunctionHarness(exclaim)
>>> harness.send("hello")
['hello!']
>>> harness.outputs
['hello!']

It is not a runtime: no subscriptions, no parallel instances, no
checkpoints. Use :class:`~sparkfn.runtime.function_run.FunctionRun` for those.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import pyarrow as pa

from sparkfn._closing import Closing
from sparkfn.api.errors import ConfigError, HarnessClosedError
from sparkfn.runtime.function.emit import Emitted
from sparkfn.runtime.function.instance import FunctionInstance, TaskResult
from sparkfn.runtime.function.rows import DLQ_REAL_TOPIC, InputRows
from sparkfn.runtime.stats import InstanceStats, MetricSummary
from sparkfn.store.clock import utc_now
from sparkfn.testing.harness_config import harness_config
from sparkfn.testing.redelivery import redelivered
from sparkfn.testing.state import InMemoryState
from sparkfn.testing.topics import HarnessTopics, ProducedMessage, TopicMessages, topic_name
from sparkfn.topics.message import READ_SCHEMA, encode_value


class HarnessState(Enum):
    """Where a harness is in its life."""

    OPEN = "open"  # messages may be sent; the function is initialized on the first one
    CLOSED = "closed"  # close() was called; nothing more is called on the function


class FunctionHarness(Closing):
    """Run a function message by message in this process, no Spark, no store.

    ``function_or_config`` is any form sparkfn runs: a :class:`~sparkfn.Function`
    subclass or instance, a plain ``process(input[, context])`` function, a
    :class:`~sparkfn.VectorizedFunction` subclass or instance, a function marked
    with :func:`~sparkfn.vectorized`, a module defining ``process``, or a
    :class:`~sparkfn.FunctionConfig` (loaded as the runtime loads it; its
    topics, user config, secrets and retry settings are then used, and the
    keyword arguments other than the schemas must be left alone), or the path
    of a ``.py`` file with ``classname`` naming its code as ``--classname``
    does (none: the file's ``process``), loaded as ``--py`` loads it, with
    no ``sys.path`` to set: ``FunctionHarness("examples/wordcount.py",
    classname="WordCount")``.

    Topic schemas decide how values are encoded and decoded, as on real
    topics: ``input_schema`` for every input, ``output_schema`` for the
    output (and the log and dead-letter topics), ``topic_schemas`` for any
    other topic by name. A schema is a type name or a ``pulsar.schema``
    schema: ``AvroSchema(Rec)`` is an ``avro`` topic with ``Rec``'s schema.
    Those are the topics that exist: a function that publishes to another
    creates it (``bytes``, as the store's default is) as it does on Spark,
    unless ``auto_create_topics=False``: then the message fails with
    :class:`~sparkfn.TopicNotFoundError`.

    Lifecycle: ``initialize(context)`` is called before the first message,
    ``close()`` once by :meth:`close` (or leaving a ``with`` block), and only
    if the function was initialized.

    >>> from sparkfn import Function
    >>> class WordCount(Function):
    ...     def process(self, input, context):
    ...         for word in input.split():
    ...             context.incr_counter(word, 1)
    ...         return input
    >>> with FunctionHarness(WordCount) as harness:
    ...     harness.send_many(["apple pie", "apple"])
    ...     harness.counters
    ['apple pie', 'apple']
    {'apple': 2, 'pie': 1}
    """

    def __init__(
        self,
        function_or_config: Any,
        *,
        name: str = "test",
        inputs: Sequence[str] = ("in",),
        output: str | None = "out",
        input_schema: Any = "string",
        output_schema: Any = "string",
        topic_schemas: Mapping[str, Any] | None = None,
        user_config: Mapping[str, Any] | None = None,
        secrets: Mapping[str, str] | None = None,
        log_topic: str | None = None,
        dead_letter_topic: str | None = None,
        drop_failed_messages: bool = False,
        max_message_retries: int | None = None,
        parallelism: int = 1,
        instance_id: int = 0,
        auto_create_topics: bool = True,
        classname: str | None = None,
    ) -> None:
        self.config, user = harness_config(
            function_or_config,
            name=name,
            inputs=inputs,
            output=output,
            user_config=user_config,
            secrets=secrets,
            log_topic=log_topic,
            dead_letter_topic=dead_letter_topic,
            drop_failed_messages=drop_failed_messages,
            max_message_retries=max_message_retries,
            parallelism=parallelism,
            auto_create_topics=auto_create_topics,
            classname=classname,
        )
        if not 0 <= instance_id < self.config.parallelism:
            msg = (
                f"FunctionHarness: instance_id must be in 0..{self.config.parallelism - 1} "
                f"(parallelism {self.config.parallelism}); got {instance_id}"
            )
            raise ConfigError(msg)
        self._topics = HarnessTopics(self.config, input_schema, output_schema, topic_schemas)
        # A failed message is negative-acked and delivered again at once (no delay here), or,
        # with max_message_retries unset (without end), when redeliver() says the delay is over.
        self._instance = FunctionInstance(
            self.config, instance_id, user, self._topics, negative_acks=True
        )
        self._offsets: dict[str, Iterator[int]] = {}
        self._state = InMemoryState()
        self._stats = InstanceStats()
        self._messages: list[ProducedMessage] = []
        self._waiting: list[Emitted] = []  # negative-acked, retries unset: for redeliver()
        self.lifecycle = HarnessState.OPEN

    # --- sending -----------------------------------------------------------------
    def send(
        self,
        value: Any,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: datetime | int | None = None,
        topic: str | None = None,
    ) -> list[Any]:
        """Process one message as a batch of its own; return what it sent to the output topic.

        ``value`` is encoded per the input topic's schema (a dict for a
        ``json`` topic, a ``str`` for ``string``, ``bytes`` for ``bytes``) and
        decoded again for the function, as the runtime does. ``event_time``
        is a datetime or milliseconds since the epoch; ``topic`` defaults to
        the first input. When the call returns, the message is committed:
        its outputs are in :attr:`outputs`/:attr:`published` and its state
        changes in :attr:`state`/:attr:`counters`.

        >>> harness = FunctionHarness(lambda text, context: f"{text}/{context.get_message_key()}")
        >>> harness.send("hi", key="k1", properties={"lang": "en"})
        ['hi/k1']
        """
        row = self._row(value, key, properties, event_time, topic)
        return self._run([row])

    def send_many(
        self,
        values: Iterable[Any],
        *,
        key: str | None = None,
        topic: str | None = None,
    ) -> list[Any]:
        """Process ``values`` as one batch, in order; return what they sent to the output topic.

        A batch is what one Spark task would see: state changes of earlier
        messages are visible to later ones, and all commit together. A
        vectorized function receives the whole batch in one call.

        >>> FunctionHarness(lambda text: text + "!").send_many(["a", "b"])
        ['a!', 'b!']
        """
        rows = [self._row(v, key, None, None, topic) for v in values]
        return self._run(rows) if rows else []

    def _row(
        self,
        value: Any,
        key: str | None,
        properties: Mapping[str, str] | None,
        event_time: datetime | int | None,
        topic: str | None,
    ) -> dict[str, Any]:
        if self.lifecycle is HarnessState.CLOSED:
            msg = (
                f"function {self.config.fqfn}: the harness is closed; create a new one to send more"
            )
            raise HarnessClosedError(msg)
        source = self._input_topic(topic)
        if isinstance(event_time, int) and not isinstance(event_time, bool):
            event_time = datetime.fromtimestamp(event_time / 1000, UTC)
        offsets = self._offsets.setdefault(source, itertools.count())
        return {
            "key": key,
            "value": self._encode_input(value, source),
            "properties": list((properties or {}).items()),
            "event_time": event_time,
            "publish_time": utc_now(),
            "producer": "harness",
            "sequence_id": None,
            "topic": source,
            "partition": 0,
            "offset": next(offsets),
        }

    def _input_topic(self, topic: str | None) -> str:
        if topic is None:
            if not self.config.inputs:
                msg = f"function {self.config.fqfn} has no named inputs; pass topic= to send"
                raise ConfigError(msg)
            return self.config.inputs[0]
        name = topic_name(topic)
        if self.config.inputs and name not in self.config.inputs:
            msg = (
                f"function {self.config.fqfn}: topic {name} is not one of its inputs "
                f"({', '.join(self.config.inputs)})"
            )
            raise ConfigError(msg)
        return name

    def _encode_input(self, value: Any, topic: str) -> bytes | None:
        if value is None:
            return None
        serde = self._instance.serdes.input_for(topic)
        if serde.custom is not None:
            return serde.encode(value)
        return encode_value(value, serde.schema_type, topic=topic, definition=serde.definition)

    def redeliver(self) -> list[Any]:
        """Deliver the messages in :attr:`waiting` again, as one batch, as the runtime does once
        their delay is over; return what they sent to the output topic. One that fails again
        waits again (``max_message_retries`` unset: it is never dead-lettered).

        >>> calls = []
        >>> def flaky(text):
        ...     calls.append(text)
        ...     return text + "!" if len(calls) > 2 else 1 / 0
        >>> harness = FunctionHarness(flaky)
        >>> harness.send("hi"), harness.redeliver(), harness.redeliver(), harness.dead_letters
        ([], [], ['hi!'], [])
        """
        if self.lifecycle is HarnessState.CLOSED:
            msg = f"function {self.config.fqfn}: the harness is closed; nothing is delivered"
            raise HarnessClosedError(msg)
        waiting, self._waiting = self._waiting, []
        return self._run_batch(redelivered(waiting, self.config.retry_topic))

    def _run(self, rows: list[dict[str, Any]]) -> list[Any]:
        return self._run_batch(pa.RecordBatch.from_pylist(rows, schema=READ_SCHEMA))

    def _run_batch(self, batch: pa.RecordBatch) -> list[Any]:
        """Run ``batch`` as a task, then each negative-acked message again, as its own
        task, until none is left (the runtime's redelivery without its delay); with
        ``max_message_retries`` unset they wait in :attr:`waiting` instead."""
        instance = self._instance
        outputs: list[Any] = []
        while batch.num_rows:
            instance.begin_task(self._state.read)
            if instance.user.vectorized:
                instance.process_batch(batch)
            else:
                instance.process_rows(InputRows(batch))
            retries: list[Emitted] = []
            outputs += self._commit(instance.end_task(), retries)
            if self.config.max_message_retries is None:
                self._waiting += retries
                break
            batch = redelivered(retries, self.config.retry_topic)
        return outputs

    def _commit(self, result: TaskResult, retries: list[Emitted]) -> list[Any]:
        self._state.commit(result.mutations)
        self._stats.merge(result.stats)
        outputs = []
        for item in result.emitted.items():
            if item.topic == self.config.retry_topic and item.kind == "dead_letter":
                retries.append(item)  # negative-acked: delivered again
                continue
            if item.kind == "log":
                value: Any = None if item.value is None else item.value.decode()
            elif item.kind in ("dead_letter", "late"):  # an input message as received
                real = item.properties.get(DLQ_REAL_TOPIC, "")
                value = self._instance.serdes.input_for(topic_name(real)).decode(item.value)
            else:
                value = self._topics.decoder(item.topic).decode(item.value)
            self._messages.append(
                ProducedMessage(
                    item.kind, item.topic, value, item.key, item.properties, item.event_time
                )
            )
            if item.topic == self.config.output and item.kind in ("output", "publish"):
                outputs.append(value)
        return outputs

    # --- what happened -----------------------------------------------------------
    @property
    def messages(self) -> list[ProducedMessage]:
        """Every committed message (outputs, publishes, dead letters, logs) in order."""
        return list(self._messages)

    @property
    def outputs(self) -> list[Any]:
        """Decoded values committed to the output topic (returned or published there)."""
        output = self.config.output
        return [] if output is None else self.published.get(output, [])

    @property
    def published(self) -> TopicMessages:
        """Decoded values per topic, for the output topic and every ``context.publish`` target."""
        by_topic: dict[str, list[Any]] = {}
        for m in self._messages:
            if m.kind in ("output", "publish"):
                by_topic.setdefault(m.topic, []).append(m.value)
        return TopicMessages(by_topic)

    @property
    def dead_letters(self) -> list[tuple[Any, dict[str, str]]]:
        """``(value, properties)`` of each dead-lettered message; the error is in ``EXCEPTION``."""
        return [(m.value, m.properties) for m in self._messages if m.kind == "dead_letter"]

    @property
    def waiting(self) -> list[tuple[Any, dict[str, str]]]:
        """``(value, properties)`` of each negative-acked message waiting to be delivered
        again (``max_message_retries`` unset), as :meth:`redeliver` will deliver them; the
        error is in ``EXCEPTION``, the redeliveries so far in ``RECONSUMETIMES``."""
        found = []
        for item in self._waiting:
            real = item.properties.get(DLQ_REAL_TOPIC, "")
            decoded = self._instance.serdes.input_for(topic_name(real)).decode(item.value)
            found.append((decoded, dict(item.properties)))
        return found

    @property
    def logs(self) -> list[str]:
        """Lines logged through ``context.get_logger()`` (only with a ``log_topic``, as at runtime)."""
        return [m.value for m in self._messages if m.kind == "log"]

    @property
    def counters(self) -> dict[str, int]:
        """Committed counters."""
        return self._state.counters

    @property
    def state(self) -> dict[str, bytes]:
        """Committed state values."""
        return self._state.values

    @property
    def stats(self) -> InstanceStats:
        """Totals over every batch: received, processed, exceptions, dead letters, user metrics."""
        return self._stats

    @property
    def metrics(self) -> dict[str, MetricSummary]:
        """User metrics from ``record_metric``, as summaries (count, sum, min, max)."""
        return dict(self._stats.user_metrics)

    def get_counter(self, key: str) -> int:
        """A committed counter (0 if never set)."""
        return self._state.read(key).counter or 0

    def get_state(self, key: str) -> bytes | None:
        """A committed state value, or ``None``."""
        return self._state.read(key).value

    def put_state(
        self, key: str, value: str | bytes | None = None, counter: int | None = None
    ) -> None:
        """Set a key outright, as an operator's ``putstate`` does, before or between sends."""
        self._state.put(key, value.encode() if isinstance(value, str) else value, counter)

    # --- lifecycle -----------------------------------------------------------------
    def close(self) -> None:
        """Call the function's ``close()`` (once, and only if it was initialized); idempotent."""
        if self.lifecycle is HarnessState.CLOSED:
            return
        self.lifecycle = HarnessState.CLOSED
        self._instance.close()
