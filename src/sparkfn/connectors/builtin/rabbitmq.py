"""``rabbitmq``: a source that consumes a queue (pika); the sink is :mod:`.rabbitmq_sink`.

::

    sparkfn sources localrun --source-type rabbitmq --output orders \\
        --source-config '{"host": "127.0.0.1", "queueName": "orders", "prefetchCount": 1000}'

The configs are Pulsar IO's RabbitMQ connector's, so a Pulsar user's
``--source-config`` works unchanged. Both: ``host`` (required), ``port``
(5672), ``virtualHost`` (``/``), ``username``/``password`` (``guest``),
``connectionName``, ``requestedChannelMax``, ``requestedFrameMax``,
``connectionTimeout`` and ``handshakeTimeout`` (ms), ``requestedHeartbeat``
(s), ``passive``. Source: ``queueName`` (required), ``prefetchCount`` (0:
unlimited; default 0 as in Pulsar), ``prefetchGlobal``, ``readTimeoutMs``.
As Pulsar's source does, a record's key is the message's routing key; its
properties are ``exchange``, ``messageId``, ``redelivered`` (when true) and
the message's headers.

**Source guarantee.** Messages are consumed with manual acknowledgement. A
message is acked (``basic.ack`` with ``multiple``, up to the last record of
the batch, in ``commit()``) only after the store transaction appending it has
committed. A crash (or SIGKILL) before that ack leaves the messages unacked:
RabbitMQ redelivers them when the connection drops, and they are appended
again. At-least-once: a crash between the append and the ack duplicates up to
one batch; nothing is lost. RabbitMQ gives no position that sparkfn could
de-duplicate by, so ``effectively_once`` is refused (the records carry no
sequence id). The queue must be durable and the messages persistent for the
broker itself not to lose them on its own restart. An existing queue is
used as it is, durable or not; with ``passive`` false (the default) a missing
one is declared with Pulsar's arguments, which make it *not* durable: declare
the queue durable yourself for its messages to survive a broker restart.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions

from sparkfn.api.connector import Record, Source, SourceContext, _EndOfStream
from sparkfn.connectors.builtin._broker import lost_broker
from sparkfn.connectors.builtin._config import describe, parse_configs
from sparkfn.connectors.builtin.rabbitmq_connection import (
    RabbitMQSourceConfig,
    answering_within,
    check,
    connect,
    source_channel,
)
from sparkfn.connectors.builtin.rabbitmq_deliveries import Deliveries

# How long a read waits for more in a stream (at least STREAM records returned since a read
# last found nothing) while records it returned are not acked yet (the runner holds them for
# its batch, or appends them): a queue that ran dry is said at once, and the runner appends
# and acks what it holds instead of waiting a whole readTimeoutMs for more. A trickle keeps
# the whole wait, and the runner its batches (up to its batch_timeout).
LINGER = 0.005
STREAM = 100

# pika's errors that mean the broker or the channel went away (a restart, a network cut).
LOST = (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError)


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
        # Delivery tags count up per channel: the last one received and the last acked.
        self.delivered = self.acked = 0
        self.streak = 0  # records returned since a read last found nothing

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
                # Deliveries are decoded by .rabbitmq_deliveries, from the first one on:
                # the consumer's tag is ours, known before it exists.
                tag = f"sparkfn-{uuid.uuid4().hex}"
                deliveries = Deliveries(self.connection, self.channel.channel_number,
                                        self._delivered)  # fmt: skip
                deliveries.consumer_tag = tag.encode()
                self.channel.basic_consume(
                    cfg.queueName, self._on_message, auto_ack=False, consumer_tag=tag
                )
        except BaseException:
            self.close()
            raise

    @property
    def _host(self) -> str:
        return f"{self.config.host}:{self.config.port}" if self.config else "?"

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        """A delivery pika decoded (one :mod:`.rabbitmq_deliveries` left to it)."""
        self._delivered(method.delivery_tag, method.redelivered, method.exchange,
                        method.routing_key, properties.message_id, properties.headers,
                        properties.timestamp, body)  # fmt: skip

    def _delivered(
        self,
        delivery_tag: int,
        redelivered: bool,
        exchange: str | bytes,
        routing_key: str | bytes,
        message_id: Any,
        headers: dict[str, Any] | None,
        timestamp: int | None,
        body: bytes,
    ) -> None:
        props = {"exchange": str(exchange)}
        if redelivered:
            props["redelivered"] = "true"
        if message_id is not None:
            props["messageId"] = str(message_id)
        if headers:
            for name, value in headers.items():
                props[str(name)] = value.decode() if isinstance(value, bytes) else str(value)
        self.delivered = delivery_tag
        self.buffer.append(
            RabbitMQRecord(
                body,
                str(routing_key),  # Pulsar's source keys a record by its routing key
                props,
                timestamp * 1000 if timestamp else None,
                delivery_tag=delivery_tag,
            )
        )

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """What has arrived; waits up to ``readTimeoutMs`` when nothing has (:data:`LINGER` in a stream)."""
        if self.connection is None or self.config is None:
            msg = f"{self.what}: read() before open()"
            raise RuntimeError(msg)
        owed = self.delivered - self.acked
        prefetch = self.config.prefetchCount
        wait = self.config.readTimeoutMs / 1000
        if prefetch > 0 and owed >= prefetch:
            # Every delivery the prefetch allows is unacked (its batch is being appended): the
            # broker sends nothing before the ack, so waiting for a message would only delay it.
            wait = 0.0
        elif owed > 0 and self.streak >= STREAM:
            wait = min(wait, LINGER)
        with lost_broker(self.what, "RabbitMQ", self._host, "consume", LOST):
            self.connection.process_data_events(time_limit=0)
            if not self.buffer and wait > 0:
                self.connection.process_data_events(time_limit=wait)
        taken, self.buffer = self.buffer, []
        self.streak = self.streak + len(taken) if taken else 0
        return taken or None

    def ack(self, record: Record) -> None:
        """The record is appended: acked with its batch in ``commit()``."""
        if isinstance(record, RabbitMQRecord):
            self.ack_tag = record.delivery_tag

    def commit(self) -> None:
        """Ack every delivery up to the batch's last (``multiple``)."""
        if self.ack_tag is not None and self.channel is not None:
            with lost_broker(self.what, "RabbitMQ", self._host, "basic.ack", LOST):
                self.channel.basic_ack(self.ack_tag, multiple=True)
            self.acked, self.ack_tag = self.ack_tag, None

    def close(self) -> None:
        """Close the connection: what is not acked goes back to the queue."""
        self.buffer.clear()
        if self.connection is not None:
            try:
                if self.connection.is_open:
                    self.connection.close()
            finally:
                self.connection = None
