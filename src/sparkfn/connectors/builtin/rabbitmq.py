"""``rabbitmq``: a source that consumes a queue and a sink that publishes to an exchange (pika).

::

    sparkfn sources localrun --source-type rabbitmq --output orders \\
        --source-config '{"host": "127.0.0.1", "queueName": "orders", "prefetchCount": 1000}'
    sparkfn sinks localrun --sink-type rabbitmq --inputs results \\
        --sink-config '{"host": "127.0.0.1", "exchangeName": "out", "routingKey": "results"}'

The configs are Pulsar IO's RabbitMQ connector's, so a Pulsar user's
``--source-config`` works unchanged. Both: ``host`` (required), ``port``
(5672), ``virtualHost`` (``/``), ``username``/``password`` (``guest``),
``connectionName``, ``requestedChannelMax``, ``requestedFrameMax``,
``connectionTimeout`` and ``handshakeTimeout`` (ms), ``requestedHeartbeat``
(s), ``passive``. Source: ``queueName`` (required), ``prefetchCount`` (0:
unlimited; default 0 as in Pulsar), ``prefetchGlobal``, ``readTimeoutMs``.
Sink: ``exchangeName`` (required, ``""`` is the default exchange),
``routingKey``, ``exchangeType`` (``topic``), ``mandatory`` (``true``),
``persistent`` (``true``).

**Source guarantee.** Messages are consumed with manual acknowledgement. A
message is acked (``basic.ack`` with ``multiple``, up to the last record of
the batch, in ``commit()``) only after the store transaction appending it has
committed. A crash (or SIGKILL) before that ack leaves the messages unacked:
RabbitMQ redelivers them when the connection drops, and they are appended
again. At-least-once: a crash between the append and the ack duplicates up to
one batch; nothing is lost. RabbitMQ gives no position that sparkfn could
de-duplicate by, so ``effectively_once`` is refused (the records carry no
sequence id). The queue must be durable and the messages persistent for the
broker itself not to lose them on its own restart; with ``passive`` false
(the default) the source declares the queue durable if it does not exist.

**Sink guarantee.** The channel is in publisher-confirm mode; ``flush()``
returns only once the broker confirmed every message of the batch, so the
batch commits only after RabbitMQ has them (persistent, ``delivery_mode`` 2).
With ``mandatory`` (default) a message no queue takes is an error, not a
silent drop. A replayed batch (a crash after the publish and before the
batch's commit) publishes its messages again: at-least-once. Each message's
``message_id`` property is ``<topic>@<partition:offset>``, stable across
replays, so a consumer can drop the duplicates.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions
import pika.spec

from sparkfn.api.connector import Record, Sink, SinkContext, Source, SourceContext, _EndOfStream
from sparkfn.connectors.builtin._config import describe, parse_configs, payload
from sparkfn.connectors.builtin.rabbitmq_connection import (
    RabbitMQSinkConfig,
    RabbitMQSourceConfig,
    answering_within,
    check,
    connect,
    sink_channel,
    source_channel,
)


@dataclass
class RabbitMQRecord(Record):
    """A record from RabbitMQ: its delivery tag, acked after the append."""

    delivery_tag: int = 0


class RabbitMQSource(Source):
    """Consumes ``queueName`` with manual acks, sent once the records are appended."""

    CONFIG = RabbitMQSourceConfig

    def __init__(self) -> None:
        self.what = "source (rabbitmq)"
        self.config: RabbitMQSourceConfig | None = None
        self.connection: pika.BlockingConnection | None = None
        self.channel: Any = None
        self.buffer: list[Record] = []
        self.ack_tag: int | None = None

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: the configs parse, the broker answers, the queue exists (or is declared)."""
        cfg = parse_configs(RabbitMQSourceConfig, configs, what)
        check(cfg, what, f"declare queue {cfg.queueName!r}", source_channel)

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Connect, check the queue and start consuming with manual acks."""
        self.what = describe("source", "rabbitmq", context)
        cfg = self.config = parse_configs(RabbitMQSourceConfig, config, self.what)
        self.connection = connect(cfg, self.what)
        try:
            with answering_within(self.connection, cfg, self.what) as step:
                self.channel = source_channel(self.connection, cfg, self.what)
                step.name = "basic.qos"
                self.channel.basic_qos(
                    prefetch_count=cfg.prefetchCount, global_qos=cfg.prefetchGlobal
                )
                step.name = "basic.consume"
                self.channel.basic_consume(cfg.queueName, self._on_message, auto_ack=False)
        except BaseException:
            self.close()
            raise

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        props = {"routingKey": str(method.routing_key), "exchange": str(method.exchange)}
        if method.redelivered:
            props["redelivered"] = "true"
        if properties.message_id is not None:
            props["messageId"] = str(properties.message_id)
        for name, value in (properties.headers or {}).items():
            props[str(name)] = value.decode() if isinstance(value, bytes) else str(value)
        event_time = properties.timestamp * 1000 if properties.timestamp else None
        self.buffer.append(
            RabbitMQRecord(
                value=body,
                properties=props,
                event_time=event_time,
                delivery_tag=method.delivery_tag,
            )
        )

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """What has arrived; waits up to ``readTimeoutMs`` when nothing has."""
        if self.connection is None or self.config is None:
            msg = f"{self.what}: read() before open()"
            raise RuntimeError(msg)
        self.connection.process_data_events(time_limit=0)
        if not self.buffer:
            self.connection.process_data_events(time_limit=self.config.readTimeoutMs / 1000)
        taken, self.buffer = self.buffer, []
        return taken or None

    def ack(self, record: Record) -> None:
        """The record is appended: acked with its batch in ``commit()``."""
        if isinstance(record, RabbitMQRecord):
            self.ack_tag = record.delivery_tag

    def commit(self) -> None:
        """Ack every delivery up to the batch's last (``multiple``)."""
        if self.ack_tag is not None and self.channel is not None:
            self.channel.basic_ack(self.ack_tag, multiple=True)
            self.ack_tag = None

    def close(self) -> None:
        """Close the connection: what is not acked goes back to the queue."""
        self.buffer.clear()
        if self.connection is not None:
            try:
                if self.connection.is_open:
                    self.connection.close()
            finally:
                self.connection = None


class RabbitMQSink(Sink):
    """Publishes to ``exchangeName`` with ``routingKey``; ``flush()`` waits for the confirms.

    Confirms are asynchronous: a batch is published in one go and ``flush()``
    then waits for the broker's acks of all of it (one round trip per batch,
    not per message as pika's blocking ``confirm_delivery`` does).
    """

    CONFIG = RabbitMQSinkConfig

    def __init__(self) -> None:
        self.what = "sink (rabbitmq)"
        self.config: RabbitMQSinkConfig | None = None
        self.connection: pika.BlockingConnection | None = None
        self.channel: Any = None
        self.buffer: list[Record] = []
        self.next_tag = 1
        self.unconfirmed: set[int] = set()
        self.nacked = 0
        self.returned: list[str] = []
        self.blocked = False

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: the configs parse, the broker answers, the exchange is usable."""
        cfg = parse_configs(RabbitMQSinkConfig, configs, what)
        check(cfg, what, f"declare exchange {cfg.exchangeName!r}", sink_channel)

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        """Connect, declare (or check) the exchange, turn publisher confirms on."""
        self.what = describe("sink", "rabbitmq", context)
        cfg = self.config = parse_configs(RabbitMQSinkConfig, config, self.what)
        connection = self.connection = connect(cfg, self.what)
        connection.add_on_connection_blocked_callback(lambda *_: setattr(self, "blocked", True))
        connection.add_on_connection_unblocked_callback(lambda *_: setattr(self, "blocked", False))
        try:
            with answering_within(connection, cfg, self.what):
                self.channel = sink_channel(connection, cfg, self.what)
        except BaseException:
            self.close()
            raise
        self.channel.add_on_return_callback(self._on_return)
        selected: list[Any] = []
        # The channel object under pika's blocking adapter: its confirm mode
        # calls back per ack frame instead of blocking every publish.
        impl = self.channel._impl  # noqa: SLF001
        impl.confirm_delivery(ack_nack_callback=self._on_confirm, callback=selected.append)
        self._wait(lambda: bool(selected), "confirm.select")

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        tag = int(method.delivery_tag)
        done = {t for t in self.unconfirmed if t <= tag} if method.multiple else {tag}
        done &= self.unconfirmed
        self.unconfirmed -= done
        if isinstance(method, pika.spec.Basic.Nack):
            self.nacked += len(done)

    def _on_return(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        self.returned.append(f"{properties.message_id} ({method.reply_code} {method.reply_text})")

    def _wait(self, done: Any, what: str) -> None:
        assert self.connection is not None and self.config is not None
        deadline = time.monotonic() + self.config.connectionTimeout / 1000
        while not done():
            if time.monotonic() > deadline:
                msg = (
                    f"{self.what}: RabbitMQ did not answer {what} in "
                    f"{self.config.connectionTimeout} ms ({self._where()})"
                )
                raise RuntimeError(msg)
            self.connection.process_data_events(time_limit=0.05)

    def _where(self) -> str:
        """Where the publishing stands, for an error that says why it waited."""
        conn = self.connection
        unconfirmed = sorted(self.unconfirmed)
        first = f", the first {unconfirmed[0]}" if unconfirmed else ""
        return (
            f"{len(unconfirmed)} unconfirmed{first}, next tag {self.next_tag}; "
            f"connection {'open' if conn is not None and conn.is_open else 'closed'}"
            f"{', blocked by the broker' if self.blocked else ''}"
        )

    def write(self, record: Record) -> None:
        """Buffer the record; it is published in ``flush()``."""
        self.buffer.append(record)

    def flush(self) -> None:
        """Publish the buffer, then wait until the broker confirmed every message of it."""
        cfg = self.config
        if cfg is None or self.channel is None or not self.buffer:
            return
        mode = pika.DeliveryMode.Persistent if cfg.persistent else pika.DeliveryMode.Transient
        for record in self.buffer:
            props = pika.BasicProperties(
                delivery_mode=mode,
                message_id=f"{record.topic}@{record.message_id}",
                timestamp=record.event_time // 1000 if record.event_time is not None else None,
                headers=dict(record.properties or {}) or None,
            )
            routing_key = cfg.routingKey or record.key or ""
            # The tag is owed before the publish: pika reads the socket while
            # it writes, so the broker's confirm can arrive inside basic_publish.
            self.unconfirmed.add(self.next_tag)
            self.next_tag += 1
            self.channel.basic_publish(
                cfg.exchangeName, routing_key, payload(record.value), props, cfg.mandatory
            )
        self._wait(lambda: not self.unconfirmed, f"the confirms of {len(self.buffer)} messages")
        if self.returned:
            msg = (
                f"{self.what}: {len(self.returned)} messages were returned unroutable by exchange "
                f"{cfg.exchangeName!r} (no queue bound for their routing key), e.g. "
                f"{self.returned[0]}; set mandatory false to let RabbitMQ drop such messages"
            )
            raise RuntimeError(msg)
        if self.nacked:
            msg = f"{self.what}: RabbitMQ refused (nack) {self.nacked} messages of the batch"
            raise RuntimeError(msg)
        self.buffer.clear()

    def close(self) -> None:
        """Drop what was not flushed (its batch did not commit) and disconnect."""
        self.buffer.clear()
        if self.connection is not None:
            try:
                if self.connection.is_open:
                    self.connection.close()
            finally:
                self.connection = None
