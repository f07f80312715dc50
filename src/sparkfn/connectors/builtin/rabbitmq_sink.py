"""``rabbitmq`` sink: publishes to an exchange (pika), with publisher confirms.

::

    sparkfn sinks localrun --sink-type rabbitmq --inputs results \\
        --sink-config '{"host": "127.0.0.1", "exchangeName": "out", "routingKey": "results"}'

The connection configs are the source's (:mod:`.rabbitmq`). Sink:
``exchangeName`` (required, ``""`` is the default exchange), ``routingKey``,
``queueName`` (as Pulsar's: the exchange is declared durable ``direct`` and
the durable queue bound to it by ``routingKey``), ``exchangeType``
(``topic``), ``mandatory`` (``true``), ``persistent`` (``true``). As
Pulsar's sink does, a message's ``routingKey`` property routes it, else the
configured ``routingKey``, else (sparkfn's) its key.

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

import struct
import time
from collections.abc import Mapping
from typing import Any

import pika
import pika.exceptions
import pika.frame
import pika.spec

from sparkfn.api.connector import Record, Sink, SinkContext
from sparkfn.connectors.builtin._config import describe, parse_configs, payload
from sparkfn.connectors.builtin.rabbitmq_connection import (
    RabbitMQSinkConfig,
    answering_within,
    check,
    connect,
    sink_channel,
)

# A body frame: type, channel, size; its payload; the frame end.
BODY_HEAD = struct.Struct(">BHI")
FRAME_END = bytes([pika.spec.FRAME_END])
# The frames handed to the connection at once (200 messages of three frames).
SEND_FRAMES = 600


class Frames:
    """A batch's publishes as AMQP frames, handed to pika's connection in one piece.

    pika's ``BlockingChannel.basic_publish`` runs the connection's I/O loop after
    every message (a poll and a send for each of its three frames): that was about
    two thirds of the sink's CPU. Here each message's frames are what pika's own
    ``Channel.basic_publish`` makes (its ``Method``, ``Header`` and ``Body``
    frames; the method frame made once per routing key), joined into one buffer
    that pika's transport sends when the sink waits for the confirms.
    """

    def __init__(self, channel: Any, exchange: str, mandatory: bool) -> None:
        self.impl = channel._impl  # noqa: SLF001 - the channel under the blocking adapter
        self.number: int = self.impl.channel_number
        self.exchange, self.mandatory = exchange, mandatory
        self.methods: dict[str, bytes] = {}
        self.parts: list[bytes] = []
        self.frames = 0
        self.limit: int = self.impl.connection._body_max_length  # noqa: SLF001

    def add(self, routing_key: str, body: bytes, props: pika.BasicProperties) -> None:
        """One message's frames: method, header, and its body cut at the frame size."""
        method = self.methods.get(routing_key)
        if method is None:
            publish = pika.spec.Basic.Publish(
                exchange=self.exchange, routing_key=routing_key, mandatory=self.mandatory
            )
            method = self.methods[routing_key] = pika.frame.Method(self.number, publish).marshal()
        parts = self.parts
        parts.append(method)
        parts.append(pika.frame.Header(self.number, len(body), props).marshal())
        self.frames += 2
        for start in range(0, len(body), self.limit):
            chunk = body[start : start + self.limit]
            parts.append(BODY_HEAD.pack(pika.spec.FRAME_BODY, self.number, len(chunk)))
            parts.append(chunk)
            parts.append(FRAME_END)
            self.frames += 1

    def send(self) -> None:
        """Hand the frames to the connection (its transport sends them as the socket takes
        them, inside the next wait on the connection)."""
        if not self.parts:
            return
        if not self.impl.is_open:
            msg = f"channel {self.number} is closed"
            raise pika.exceptions.ChannelWrongStateError(msg)
        data = b"".join(self.parts)
        conn = self.impl.connection
        conn.bytes_sent += len(data)
        conn.frames_sent += self.frames
        conn._adapter_emit_data(data)  # noqa: SLF001 - what pika's _send_message ends with
        self.parts, self.frames = [], 0


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
        cfg, connection = self.config, self.connection
        if cfg is None or connection is None or self.channel is None or not self.buffer:
            return
        mode = pika.DeliveryMode.Persistent if cfg.persistent else pika.DeliveryMode.Transient
        frames = Frames(self.channel, cfg.exchangeName, cfg.mandatory)
        for record in self.buffer:
            props = pika.BasicProperties(
                delivery_mode=mode,
                message_id=f"{record.topic}@{record.message_id}",
                timestamp=record.event_time // 1000 if record.event_time is not None else None,
                headers=dict(record.properties or {}) or None,
            )
            # Pulsar's: a message's routingKey property, else the configured one; sparkfn's
            # own fallback when neither is set, the message's key.
            wanted = (record.properties or {}).get("routingKey")
            routing_key = str(wanted or cfg.routingKey or record.key or "")
            # The tag is owed before the publish (the confirm can come as soon as it is sent).
            self.unconfirmed.add(self.next_tag)
            self.next_tag += 1
            frames.add(routing_key, payload(record.value), props)
            if frames.frames >= SEND_FRAMES:  # let the broker start on them meanwhile
                frames.send()
                connection.process_data_events(time_limit=0)
        frames.send()
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
