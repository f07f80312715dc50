"""RabbitMQ's connection for the ``rabbitmq`` source and sink: configs, connect, channels.

Config names are Pulsar IO's. :func:`connect` opens a connection (a
:class:`ConfigError` for refused credentials or virtual host, a
:class:`BrokerUnreachableError` for a broker it cannot reach); the
channel helpers declare (or, with ``passive``, check) the queue or
exchange; :func:`check` does both for a create's check, bounded.

After the handshake, pika's blocking calls (``channel()``, a declare,
``basic_qos``) wait for the broker's answer with no timeout of their own:
only heartbeats end a wait on a broker that stopped answering, and Pulsar
allows ``requestedHeartbeat`` 0, which turns them off. A run's open therefore
goes through :func:`answering_within`: every step of it must be answered
within ``connectionTimeout``, or the connection is torn down and the open
fails with a :class:`BrokerUnreachableError` naming the step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar

import pika
import pika.exceptions
from pydantic import Field

from sparkfn.api.errors import BrokerUnreachableError, ConfigError
from sparkfn.connectors.builtin._broker import CHECK_SECONDS, BrokerCheck, run_check
from sparkfn.connectors.builtin._config import BuiltinConfig, PollMs, TimeoutMs

# pika logs every failed connect as an ERROR with a traceback; connect() says why itself.
logging.getLogger("pika").setLevel(logging.CRITICAL)

C = TypeVar("C", bound="RabbitMQConfig")

# AMQP's short strings (queue, exchange, routing key, virtual host): at most 255 bytes.
ShortStr = Annotated[str, Field(max_length=255)]


class RabbitMQConfig(BuiltinConfig):
    """Pulsar IO's connection settings for RabbitMQ."""

    connectionName: str | None = None
    host: str = Field(min_length=1)
    port: int = Field(default=5672, ge=1, le=65535)
    virtualHost: ShortStr = "/"
    username: str = "guest"
    password: str = "guest"
    requestedChannelMax: int = Field(default=0, ge=0, le=65535)
    requestedFrameMax: int = Field(default=0, ge=0, le=131072)  # pika's largest frame
    connectionTimeout: TimeoutMs = 60000
    handshakeTimeout: TimeoutMs = 10000
    requestedHeartbeat: int = Field(default=60, ge=0, le=65535)
    passive: bool = False


class RabbitMQSourceConfig(RabbitMQConfig):
    """The source's configs."""

    queueName: ShortStr = Field(min_length=1)
    prefetchCount: int = Field(default=0, ge=0, le=65535)
    prefetchGlobal: bool = False
    readTimeoutMs: PollMs = 100


class RabbitMQSinkConfig(RabbitMQConfig):
    """The sink's configs."""

    exchangeName: ShortStr
    routingKey: ShortStr = ""
    queueName: ShortStr | None = None
    exchangeType: Literal["direct", "fanout", "topic", "headers"] = "topic"
    mandatory: bool = True
    persistent: bool = True


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
        msg = (
            f"{what}: configs.host/port: cannot reach RabbitMQ at {where} (step: connect): {exc!r}"
        )
        raise BrokerUnreachableError(msg) from None


class OpenStep:
    """The step of an open under way (for the message of one that got no answer)."""

    def __init__(self) -> None:
        self.name = "open a channel"


@contextmanager
def answering_within(
    conn: pika.BlockingConnection, cfg: RabbitMQConfig, what: str
) -> Iterator[OpenStep]:
    """Bound the block's broker calls on ``conn`` to ``connectionTimeout`` in all.

    A timer of pika's own I/O loop (which runs inside every blocking call)
    tears the connection down when the time is up, as pika's heartbeat check
    does; the blocked call then raises, and so does this, a
    :class:`BrokerUnreachableError` naming the step that got no answer.
    """
    seconds = cfg.connectionTimeout / 1000
    where = f"{cfg.host}:{cfg.port}"
    step = OpenStep()
    late: list[str] = []
    impl = conn._impl  # noqa: SLF001 - the adapter's connection: its loop and its stream

    def give_up() -> None:
        late.append(step.name)
        impl._terminate_stream(  # noqa: SLF001 - what pika's heartbeat check does
            pika.exceptions.AMQPConnectionError(f"no answer within {seconds:g} s")
        )

    timer = impl.ioloop.call_later(seconds, give_up)
    try:
        yield step
    except pika.exceptions.AMQPConnectionError as exc:
        if not late:
            msg = f"{what}: configs.host/port: RabbitMQ at {where} (step: {step.name}): {exc!r}"
            raise BrokerUnreachableError(msg) from None
        msg = (
            f"{what}: configs.host/port: RabbitMQ at {where} did not answer within "
            f"{cfg.connectionTimeout} ms (configs.connectionTimeout) after the handshake "
            f"(step: {late[0]})"
        )
        raise BrokerUnreachableError(msg) from None
    finally:
        impl.ioloop.remove_timeout(timer)


def check(cfg: C, what: str, step: str, channel: Callable[[Any, C, str], Any]) -> None:
    """Connect and open the channel as a run would, within
    :data:`~._broker.CHECK_SECONDS` in all: every timeout capped, heartbeats that
    close a connection whose broker stopped answering a declare."""
    capped = cfg.model_copy(
        update={
            "connectionTimeout": BrokerCheck.cap_ms(cfg.connectionTimeout),
            "handshakeTimeout": BrokerCheck.cap_ms(cfg.handshakeTimeout),
            "requestedHeartbeat": int(CHECK_SECONDS),
        }
    )

    def check(progress: BrokerCheck) -> None:
        conn = connect(capped, what)
        try:
            progress.step = step
            channel(conn, capped, what)
        finally:
            if conn.is_open:
                conn.close()

    run_check(what, "RabbitMQ", f"{cfg.host}:{cfg.port}", check)


def _closed_by_broker(exc: pika.exceptions.ChannelClosedByBroker) -> str:
    return f"{exc.reply_code} {exc.reply_text}"


def source_channel(conn: pika.BlockingConnection, cfg: RabbitMQSourceConfig, what: str) -> Any:
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
    cfg: RabbitMQSourceConfig, exc: pika.exceptions.ChannelClosedByBroker, what: str
) -> str:
    if exc.reply_code == 404:
        return f"{what}: configs.queueName: queue {cfg.queueName!r} does not exist"
    return f"{what}: configs.queueName: queue {cfg.queueName!r}: {_closed_by_broker(exc)}"


def sink_channel(conn: pika.BlockingConnection, cfg: RabbitMQSinkConfig, what: str) -> Any:
    """A channel on which the exchange exists; with ``queueName`` (as Pulsar's sink) the
    exchange is a durable ``direct`` one and the durable queue is bound to it by ``routingKey``."""
    channel = conn.channel()
    if cfg.queueName:
        return _sink_queue(channel, cfg, what)
    if cfg.exchangeName:
        try:
            channel.exchange_declare(
                cfg.exchangeName, cfg.exchangeType, passive=cfg.passive, durable=True
            )
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code == 404:
                msg = f"{what}: configs.exchangeName: exchange {cfg.exchangeName!r} does not exist"
            else:
                msg = (
                    f"{what}: configs.exchangeName/exchangeType: exchange "
                    f"{cfg.exchangeName!r}: {_closed_by_broker(exc)}"
                )
            raise ConfigError(msg) from None
    return channel


def _sink_queue(channel: Any, cfg: RabbitMQSinkConfig, what: str) -> Any:
    queue = str(cfg.queueName)
    try:
        if cfg.exchangeName:  # the default exchange routes to every queue by its name already
            channel.exchange_declare(cfg.exchangeName, "direct", durable=True)
        channel.queue_declare(queue, durable=True, exclusive=False, auto_delete=False)
        if cfg.exchangeName:
            channel.queue_bind(queue, cfg.exchangeName, cfg.routingKey)
    except pika.exceptions.ChannelClosedByBroker as exc:
        msg = (
            f"{what}: configs.exchangeName/queueName: exchange {cfg.exchangeName!r} "
            f"(direct, durable), queue {queue!r} (durable): {_closed_by_broker(exc)}"
        )
        raise ConfigError(msg) from None
    return channel
