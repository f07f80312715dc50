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

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions
import pika.spec
from pydantic import Field

from sparkfn.api.connector import Record, Source, SourceContext, _EndOfStream
from sparkfn.api.errors import ConfigError
from sparkfn.connectors.builtin._config import BuiltinConfig, describe, parse_configs


class RabbitMQConfig(BuiltinConfig):
    """Pulsar IO's connection settings for RabbitMQ."""

    connectionName: str | None = None
    host: str = Field(min_length=1)
    port: int = Field(default=5672, ge=1, le=65535)
    virtualHost: str = "/"
    username: str = "guest"
    password: str = "guest"
    requestedChannelMax: int = Field(default=0, ge=0, le=65535)
    requestedFrameMax: int = Field(default=0, ge=0)
    connectionTimeout: int = Field(default=60000, ge=1)
    handshakeTimeout: int = Field(default=10000, ge=1)
    requestedHeartbeat: int = Field(default=60, ge=0)
    passive: bool = False


class RabbitMQSourceConfig(RabbitMQConfig):
    """The source's configs."""

    queueName: str = Field(min_length=1)
    prefetchCount: int = Field(default=0, ge=0, le=65535)
    prefetchGlobal: bool = False
    readTimeoutMs: int = Field(default=100, ge=1)


def connect(cfg: RabbitMQConfig, what: str) -> pika.BlockingConnection:
    """A connection; unreachable host, bad credentials or vhost are a :class:`ConfigError`."""
    params: dict[str, Any] = {
        "host": cfg.host,
        "port": cfg.port,
        "virtual_host": cfg.virtualHost,
        "credentials": pika.PlainCredentials(cfg.username, cfg.password),
        "heartbeat": cfg.requestedHeartbeat,
        "socket_timeout": cfg.connectionTimeout / 1000,
        "stack_timeout": (cfg.connectionTimeout + cfg.handshakeTimeout) / 1000,
        "blocked_connection_timeout": cfg.connectionTimeout / 1000,
        "connection_attempts": 1,
    }
    if cfg.requestedChannelMax:
        params["channel_max"] = cfg.requestedChannelMax
    if cfg.requestedFrameMax:
        params["frame_max"] = cfg.requestedFrameMax
    if cfg.connectionName:
        params["client_properties"] = {"connection_name": cfg.connectionName}
    where = f"{cfg.host}:{cfg.port}"
    try:
        return pika.BlockingConnection(pika.ConnectionParameters(**params))
    except pika.exceptions.ProbableAuthenticationError:
        msg = (
            f"{what}: configs.username/password: RabbitMQ at {where} refused user {cfg.username!r}"
        )
        raise ConfigError(msg) from None
    except pika.exceptions.ProbableAccessDeniedError:
        msg = (
            f"{what}: configs.virtualHost: user {cfg.username!r} cannot open virtual host "
            f"{cfg.virtualHost!r} at {where}"
        )
        raise ConfigError(msg) from None
    except pika.exceptions.AMQPError as exc:
        msg = f"{what}: configs.host/port: cannot reach RabbitMQ at {where}: {exc!r}"
        raise ConfigError(msg) from None


@contextmanager
def checking(conn: pika.BlockingConnection) -> Iterator[pika.BlockingConnection]:
    """A connection for a config check, closed however the check ends."""
    try:
        yield conn
    finally:
        if conn.is_open:
            conn.close()


def closed_by_broker(exc: pika.exceptions.ChannelClosedByBroker) -> str:
    return f"{exc.reply_code} {exc.reply_text}"


def _source_channel(conn: pika.BlockingConnection, cfg: RabbitMQSourceConfig, what: str) -> Any:
    """A channel on which ``queueName`` exists.

    An existing queue is taken as it is, durable or not (a declare whose
    arguments differ from the queue's would fail with 406). Without
    ``passive`` a missing queue is declared with Pulsar's connector's
    arguments: not durable, not exclusive, not auto-deleted.
    """
    channel = conn.channel()
    try:
        channel.queue_declare(cfg.queueName, passive=True)
        return channel
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != 404 or cfg.passive:
            raise ConfigError(_queue_problem(cfg, exc, what)) from None
    channel = conn.channel()  # the broker closed the one the passive declare failed on
    try:
        channel.queue_declare(cfg.queueName, durable=False, exclusive=False, auto_delete=False)
    except pika.exceptions.ChannelClosedByBroker as exc:
        raise ConfigError(_queue_problem(cfg, exc, what)) from None
    return channel


def _queue_problem(
    cfg: RabbitMQSourceConfig,
    exc: pika.exceptions.ChannelClosedByBroker,
    what: str,
) -> str:
    if exc.reply_code == 404:
        return f"{what}: configs.queueName: queue {cfg.queueName!r} does not exist"
    return f"{what}: configs.queueName: queue {cfg.queueName!r}: {closed_by_broker(exc)}"


@dataclass
class RabbitMQRecord(Record):
    """A record from RabbitMQ: its delivery tag, acked after the append."""

    delivery_tag: int = 0


class RabbitMQSource(Source):
    """Consumes ``queueName`` with manual acks, sent once the records are appended."""

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
        with checking(connect(cfg, what)) as conn:
            _source_channel(conn, cfg, what)

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Connect, check the queue and start consuming with manual acks."""
        self.what = describe("source", "rabbitmq", context)
        cfg = self.config = parse_configs(RabbitMQSourceConfig, config, self.what)
        self.connection = connect(cfg, self.what)
        self.channel = _source_channel(self.connection, cfg, self.what)
        self.channel.basic_qos(prefetch_count=cfg.prefetchCount, global_qos=cfg.prefetchGlobal)
        self.channel.basic_consume(cfg.queueName, self._on_message, auto_ack=False)

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        props = {"exchange": str(method.exchange)}
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
                key=str(method.routing_key),  # Pulsar's source keys a record by its routing key
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
