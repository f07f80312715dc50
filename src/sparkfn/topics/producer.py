"""Producing messages to a topic.

>>> producer = Producer(store, "orders", name="checkout-1")
>>> producer.send({"id": 1}, key="alice", sequence_id=1)
'3:0'

``send`` is durable when it returns: one store transaction per call, a few
hundred a second. ``send_async`` batches on the client as Pulsar's producers
do, for 100 k messages a second and more from one producer::

    with Producer(store, "orders") as producer:
        futures = [producer.send_async(line) for line in lines]
        producer.flush()                     # every one durable, or raises
    ids = [f.result() for f in futures]

Unlike Pulsar's producer, one that fails an append stays failed (see
:meth:`Producer.flush`): make a new one to go on.

A producer with a ``name`` gets de-duplication: a message whose
``sequence_id`` is not above the highest one already persisted for that
producer and partition is dropped (Pulsar's effectively-once producer).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, NoReturn

from sparkfn.api.errors import ConfigError, PayloadError
from sparkfn.config.names import TopicName
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.append import MessageColumns, append
from sparkfn.topics.batching import Batcher
from sparkfn.topics.log import partition_for_key
from sparkfn.topics.message import Message, SchemaType, check_values, encode_value

# Pulsar's defaults: batchingMaxMessages 1000, batchingMaxPublishDelay 10 ms.
DEFAULT_BATCHING_MAX_MESSAGES = 1000
DEFAULT_BATCHING_MAX_PUBLISH_DELAY = timedelta(milliseconds=10)
# Messages buffered by send_async and not yet appended, at most; then it blocks.
DEFAULT_MAX_PENDING_MESSAGES = 100_000


class Producer:
    """Appends messages to one topic.

    * :meth:`send` appends one message and returns once it is durable.
    * :meth:`send_batch` appends a list of messages atomically.
    * :meth:`send_async` buffers a message and returns a future; a batch is
      appended (atomically, by a background thread) when
      ``batching_max_messages`` are buffered or ``batching_max_publish_delay``
      (seconds or a ``timedelta``) after its first message. :meth:`flush`
      waits for every buffered message; :meth:`close` flushes and stops the
      thread (a ``with`` block closes the producer). At most
      ``max_pending_messages`` wait to be appended (0: no bound); then
      ``send_async`` waits for room.

    Per partition, offsets follow the order of the calls, whichever of the
    three made them. Methods may be called from several threads. A producer
    that never calls ``send_async`` starts no thread.

    A failed append of ``send_async``'s is final: the producer appends
    nothing more, and every later ``flush``, ``close`` and send raises
    :class:`~sparkfn.api.errors.ProducerClosedError` (see :meth:`flush`).
    """

    def __init__(
        self,
        store: Store,
        topic: str | TopicName,
        *,
        name: str | None = None,
        batching_max_messages: int = DEFAULT_BATCHING_MAX_MESSAGES,
        batching_max_publish_delay: float | timedelta = DEFAULT_BATCHING_MAX_PUBLISH_DELAY,
        max_pending_messages: int = DEFAULT_MAX_PENDING_MESSAGES,
    ) -> None:
        delay = (
            batching_max_publish_delay.total_seconds()
            if isinstance(batching_max_publish_delay, timedelta)
            else float(batching_max_publish_delay)
        )
        if batching_max_messages < 1:
            msg = f"batching_max_messages must be at least 1; got {batching_max_messages}"
            raise ConfigError(msg)
        if delay < 0:
            msg = f"batching_max_publish_delay must not be negative; got {batching_max_publish_delay!r}"
            raise ConfigError(msg)
        if max_pending_messages < 0:
            msg = f"max_pending_messages must be 0 (no bound) or more; got {max_pending_messages}"
            raise ConfigError(msg)
        self.store = store
        self.topic: TopicInfo = TopicAdmin(store).get(topic)
        self.name = name
        self._round_robin = itertools.count()
        self._plain_bytes = self.topic.schema_type is SchemaType.BYTES
        self._batcher = Batcher(
            self._append,
            name=f"producer {name!r} to topic {self.topic.name}"
            if name
            else f"producer to topic {self.topic.name}",
            max_messages=batching_max_messages,
            max_delay=delay,
            max_pending=max_pending_messages,
        )

    # --- one message, durable on return -----------------------------------------------

    def send(
        self,
        value: Any,
        *,
        key: str | None = None,
        properties: dict[str, str] | None = None,
        event_time: datetime | None = None,
        sequence_id: int | None = None,
        partition: int | None = None,
    ) -> str | None:
        """Send one message; returns its id ``partition:offset`` or ``None`` if de-duplicated.

        It is durable when this returns (one store transaction). Messages
        given to :meth:`send_async` before are appended first.
        """
        data = self._value(value)
        pairs = self._pairs(key, properties, event_time, sequence_id)
        part = self._partition(key, partition)
        columns = MessageColumns()
        columns.add(data, key, pairs, event_time, sequence_id)
        return self._send_now({part: columns})[part][0]

    # --- batched on the client ------------------------------------------------------

    def send_async(
        self,
        value: Any,
        *,
        key: str | None = None,
        properties: dict[str, str] | None = None,
        event_time: datetime | None = None,
        sequence_id: int | None = None,
        partition: int | None = None,
    ) -> Future[str | None]:
        """Buffer one message for a batched append; the future resolves to its id.

        The value is encoded and checked against the topic's schema here: a
        bad one raises :class:`~sparkfn.api.errors.PayloadError` at once and
        is not buffered. The future's result is ``partition:offset``, or
        ``None`` if de-duplicated; if the batch's append fails, the future
        carries the exception, and every later :meth:`flush` raises (a
        message queued behind a failed append is not tried: its future
        carries a ``ProducerClosedError`` caused by that failure). Once the
        producer failed, ``send_async`` raises that error at once. The
        future resolves on the producer's background thread, where its done
        callbacks run too (they must not call ``flush`` or ``close``).

        >>> future = producer.send_async(b"hello", key="k")
        >>> producer.flush()
        >>> future.result()
        '2:17'
        """
        data = self._value(value)
        pairs = self._pairs(key, properties, event_time, sequence_id)
        part = self._partition(key, partition)
        return self._batcher.add(part, data, key, pairs, event_time, sequence_id)

    def flush(self) -> None:
        """Wait until every message sent so far is appended (durable), or raise.

        The first append that fails fails the producer, for good: the
        messages queued behind it are not tried, and from then on every
        ``flush`` (and ``close``), from any thread, raises a new
        :class:`~sparkfn.api.errors.ProducerClosedError` that names the
        topic and the first failure, which is its ``__cause__``; ``send``,
        ``send_batch`` and ``send_async`` raise it at once. Each message's
        future carries its own error. So a ``flush`` that returns means
        that nothing sent before it failed, whichever thread sent it.

        Pulsar's producer fails the futures and goes on. A sparkfn producer
        does not, because one failure reported once, to whichever thread
        flushed first, would let another thread's ``flush`` return although
        its messages were in the failed append, and because what it
        appended stays a prefix of what was sent, in order. To go on after
        a failure, make a new producer.
        """
        self._batcher.flush()

    def close(self) -> None:
        """Flush, then stop the background thread; later sends raise ``ProducerClosedError``.

        Raises as :meth:`flush` does, after the thread stopped, and again on
        every later call once the producer failed; otherwise a second call
        does nothing. A ``with`` block's exit raises it too.
        """
        self._batcher.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- many messages in one append ----------------------------------------------------

    def encode(self, values: Iterable[Any]) -> list[Message]:
        """Wrap plain values as messages, validated against the topic schema."""
        return [Message(self._encode(v)) for v in values]

    def send_batch(
        self, messages: Sequence[Message], *, partition: int | None = None
    ) -> list[str | None]:
        """Append ``messages`` atomically; returns ids in order (``None`` = duplicate dropped).

        ``partition`` sends them all there; otherwise each goes to its own
        ``Message.partition``, else by key, else round robin. Messages given
        to :meth:`send_async` before are appended first.
        """
        if partition is not None:
            self._check_partition(partition)
        # Messages may be built by hand, not through encode_value: the topic's
        # schema must hold for them too, or consumers fail to decode them.
        check_values(
            [m.value for m in messages],
            self.topic.schema_type,
            topic=str(self.topic.name),
            definition=self.topic.schema_definition,
        )
        parts: dict[int, MessageColumns] = {}
        rows: list[tuple[int, int]] = []  # each message's (partition, row there)
        for message in messages:
            part = self._route(message, partition)
            columns = parts.get(part)
            if columns is None:
                columns = parts[part] = MessageColumns()
            rows.append((part, len(columns)))
            columns.add(
                message.value,
                message.key,
                list(message.properties.items()) if message.properties else None,
                message.event_time,
                message.sequence_id,
            )
        ids = self._send_now(parts)
        return [ids[part][row] for part, row in rows]

    def send_columns(self, parts: dict[int, MessageColumns]) -> dict[int, list[str | None]]:
        """Append rows already laid out per partition, atomically; per partition, their ids.

        What :meth:`send_batch` does without a :class:`Message` per row: for a
        caller that has its rows' fields at hand (a source's records). The
        values must be stored bytes; they are checked against the topic's
        schema here, as ``send_batch`` checks them.
        """
        for part, columns in parts.items():
            self._check_partition(part)
            check_values(
                columns.values,
                self.topic.schema_type,
                topic=str(self.topic.name),
                definition=self.topic.schema_definition,
            )
        return self._send_now(parts)

    def partition_of(self, key: str | None, partition: int | None) -> int:
        """Where a message goes: ``partition`` (checked), else by key, else round robin."""
        return self._partition(key, partition)

    # --- internals --------------------------------------------------------------------

    def _send_now(self, parts: dict[int, MessageColumns]) -> dict[int, list[str | None]]:
        batcher = self._batcher
        batcher.check_open()
        # Wait for what send_async buffered, to keep the order of the calls per
        # partition; a done callback (on the flusher thread) cannot wait for it.
        if batcher.pending and threading.current_thread() is not batcher.thread:
            batcher.drain()
            batcher.check_open()  # not after a hole that a failed append left
        return self._append(parts)

    def _append(self, parts: dict[int, MessageColumns]) -> dict[int, list[str | None]]:
        return append(self.store, self.topic, self.name, parts)

    def _value(self, value: Any) -> bytes:
        """The stored bytes of ``value``, checked against the topic's schema."""
        return value if self._plain_bytes and type(value) is bytes else self._encode(value)

    def _pairs(
        self,
        key: str | None,
        properties: dict[str, str] | None,
        event_time: datetime | None,
        sequence_id: int | None,
    ) -> list[tuple[str, str]] | None:
        """The fields besides the value checked; the properties as a row holds them."""
        if key is not None and type(key) is not str:
            self._reject("key", "a str", key)
        pairs = None
        if properties:
            pairs = list(properties.items())
            for name, text in pairs:
                if type(name) is not str or type(text) is not str:
                    self._reject("properties", "a dict of str to str", properties)
        if event_time is not None and not isinstance(event_time, datetime):
            self._reject("event_time", "a datetime", event_time)
        if sequence_id is not None and (type(sequence_id) is not int or sequence_id < 0):
            self._reject("sequence_id", "an int of 0 or more", sequence_id)
        return pairs

    def _partition(self, key: str | None, partition: int | None) -> int:
        """The given partition, checked; else the key's; else the next in turn."""
        if partition is not None:
            self._check_partition(partition)
            return partition
        if key is not None:
            return partition_for_key(key, self.topic.partitions)
        return next(self._round_robin) % self.topic.partitions

    def _reject(self, field: str, expected: str, got: object) -> NoReturn:
        msg = (
            f"topic {self.topic.name}: a message's {field} must be {expected}; "
            f"got a {type(got).__name__}: {got!r:.80}"
        )
        raise PayloadError(msg)

    def _encode(self, value: Any) -> bytes:
        topic = self.topic
        return encode_value(
            value, topic.schema_type, topic=str(topic.name), definition=topic.schema_definition
        )

    def _route(self, message: Message, partition: int | None) -> int:
        if partition is not None:
            return partition
        if message.partition is not None:
            self._check_partition(message.partition)
            return message.partition
        if message.key is not None:
            return partition_for_key(message.key, self.topic.partitions)
        return next(self._round_robin) % self.topic.partitions

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.topic.partitions:
            msg = (
                f"partition for topic {self.topic.name} must be between 0 and "
                f"{self.topic.partitions - 1}; got {partition}"
            )
            raise ConfigError(msg)
