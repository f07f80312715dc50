"""``nats``: a NATS JetStream source (durable pull consumer) and sink (de-duplicated publishes).

::

    sparkfn sources localrun --source-type nats --output events \\
        --source-config '{"servers": "nats://127.0.0.1:4222", "stream": "EVENTS", "durableName": "sparkfn"}'
    sparkfn sinks localrun --sink-type nats --inputs results \\
        --sink-config '{"servers": "nats://127.0.0.1:4222", "subject": "results.out"}'

Both: ``servers`` (URL or list, ``nats://127.0.0.1:4222``), ``user``,
``password``, ``token``, ``connectTimeoutMs`` (5000). Source: ``stream``
(required; it must exist), ``durableName`` (required), ``filterSubject``
(for a new consumer), ``batchSize`` (messages per fetch, 1000),
``fetchTimeoutMs`` (100), ``ackWaitSeconds`` (30) and ``maxAckPending``
(10000) for a new consumer. Sink: ``subject`` (required), ``stream``
(optional: publishes must land in that stream), ``publishTimeoutMs`` (5000).

nats-py is asyncio; each connector object runs its own event loop on a
thread of its own (``<source or sink>-nats-loop``) and calls it from
sparkfn's thread; ``close()`` closes the connection, stops the loop and
joins the thread.

**Source guarantee.** The durable pull consumer (explicit acks) is created
if it does not exist; its settings then stay as JetStream has them. Fetched
messages are acked in ``commit()``, after the store transaction appending
them committed, and the acks are flushed to the server before ``commit()``
returns. A crash before the acks leaves the messages pending: JetStream
delivers them again after ``ackWaitSeconds``. At-least-once, with duplicates
of what was appended but not acked; nothing is lost while the stream keeps
the messages (its retention limits are JetStream's). Redeliveries come after
newer messages, so the stream sequence cannot serve as an increasing
sequence id: ``effectively_once`` is refused.

**Sink guarantee.** Every record is published with a ``Nats-Msg-Id`` header
derived from its position, ``<sink tenant/ns/name>:<topic>@<partition:offset>``,
and ``flush()`` waits for every publish ack before the batch commits. A
batch replayed after a crash publishes the same ids again and JetStream drops
them as duplicates (``duplicate`` in the ack), so each message is stored once
as long as the replay comes within the stream's duplicate window (2 minutes
by default). A publish whose subject no stream takes is an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig
from pydantic import Field, field_validator

from sparkfn.api.connector import Record, Sink, SinkContext, Source, SourceContext, _EndOfStream
from sparkfn.api.errors import BrokerUnreachableError, ConfigError
from sparkfn.connectors.builtin._broker import BrokerCheck, lost_broker, run_check
from sparkfn.connectors.builtin._config import (
    MAX_ITEMS,
    BuiltinConfig,
    Count,
    PollMs,
    TimeoutMs,
    describe,
    parse_configs,
)
from sparkfn.connectors.builtin._event_loop import EventLoop
from sparkfn.connectors.builtin.nats_publish import Publisher, sink_message
from sparkfn.connectors.builtin.nats_pull import Puller, reply_fields

# A sink hands this many publishes to the connection at once (two such windows in flight).
PUBLISH_WINDOW = 512
# nats-py's own bound on a JetStream request (stream info, consumer info, ack flush), s.
JS_TIMEOUT = 5.0


# What a call to a server that went away raises (a restart, a network cut, no answer).
LOST = (nats.errors.Error, TimeoutError, OSError)


class NatsConfig(BuiltinConfig):
    """Connection configs."""

    servers: list[str] = Field(
        default=["nats://127.0.0.1:4222"], min_length=1, max_length=MAX_ITEMS
    )
    user: str | None = None
    password: str | None = None
    token: str | None = None
    connectTimeoutMs: TimeoutMs = 5000

    @field_validator("servers", mode="before")
    @classmethod
    def _servers(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [s.strip() for s in value.split(",") if s.strip()]
        return value


class NatsSourceConfig(NatsConfig):
    """The source's configs."""

    stream: str = Field(min_length=1)
    durableName: str = Field(min_length=1)
    filterSubject: str | None = None
    batchSize: Count = 1000
    fetchTimeoutMs: PollMs = 100
    ackWaitSeconds: float = Field(default=30.0, gt=0, le=3600)
    maxAckPending: int = Field(default=10000, ge=1, le=1_000_000)


class NatsSinkConfig(NatsConfig):
    """The sink's configs."""

    subject: str = Field(min_length=1)
    stream: str | None = None
    publishTimeoutMs: TimeoutMs = 5000


def _disconnect(loop: EventLoop | None, nc: Client | None) -> None:
    """Close ``nc`` on its loop (at most 10 s), then stop the loop, whatever the close did."""
    if loop is None:
        return
    try:
        if nc is not None:
            loop.run(nc.close(), 10)
    finally:
        loop.close()


def _open_bound(cfg: NatsConfig) -> float:
    """The longest an ``open()`` waits: the connect, then a few JetStream requests."""
    return cfg.connectTimeoutMs / 1000 + 1 + 4 * JS_TIMEOUT


async def _connect(cfg: NatsConfig, what: str) -> Client:
    options: dict[str, Any] = {
        "connect_timeout": cfg.connectTimeoutMs / 1000,
        "allow_reconnect": False,
        "max_reconnect_attempts": 0,
    }
    if cfg.user is not None:
        options["user"] = cfg.user
        options["password"] = cfg.password or ""
    if cfg.token is not None:
        options["token"] = cfg.token

    seen: list[Exception] = []

    async def note(exc: Exception) -> None:
        """Connect errors surface as the ConfigError below; later ones through the failing call."""
        seen.append(exc)

    # nats-py retries a refused first connect forever: the timeout bounds it.
    timeout = cfg.connectTimeoutMs / 1000 + 1.0
    try:
        return await asyncio.wait_for(nats.connect(cfg.servers, error_cb=note, **options), timeout)
    except Exception as exc:
        cause: Exception = seen[-1] if seen and isinstance(exc, TimeoutError) else exc
        text = f"{type(cause).__name__}: {cause}"
        if "uthoriz" in text or "uthentic" in text:
            msg = f"{what}: configs.user/password/token: NATS at {cfg.servers} refused them: {text}"
            raise ConfigError(msg) from None
        msg = f"{what}: configs.servers: cannot reach NATS at {cfg.servers} (step: connect): {text}"
        raise BrokerUnreachableError(msg) from None


def _check(cfg: NatsSourceConfig | NatsSinkConfig, what: str) -> None:
    """Connect and look the stream up, within :data:`~._broker.CHECK_SECONDS` in all."""
    capped = cfg.model_copy(update={"connectTimeoutMs": BrokerCheck.cap_ms(cfg.connectTimeoutMs)})

    async def check(progress: BrokerCheck) -> None:
        nc = await _connect(capped, what)
        try:
            if cfg.stream is not None:
                progress.step = f"look up stream {cfg.stream!r}"
                js = nc.jetstream(timeout=capped.connectTimeoutMs / 1000)
                await _stream_exists(js, cfg.stream, what)
        finally:
            await nc.close()

    # The check's own thread has no loop: the caller's may run one (an async server).
    run_check(what, "NATS", ", ".join(cfg.servers), lambda progress: asyncio.run(check(progress)))


async def _stream_exists(js: JetStreamContext, stream: str, what: str) -> None:
    try:
        await js.stream_info(stream)
    except nats.js.errors.NotFoundError:
        msg = f"{what}: configs.stream: JetStream has no stream {stream!r}"
        raise ConfigError(msg) from None


@dataclass
class NatsRecord(Record):
    """A message fetched from JetStream, acked after the append."""

    msg: Msg | None = None


class NatsJetStreamSource(Source):
    """Fetches from a durable pull consumer; acks after the append."""

    def __init__(self) -> None:
        self.what = "source (nats)"
        self.config: NatsSourceConfig | None = None
        self.loop: EventLoop | None = None
        self.nc: Client | None = None
        self.puller: Puller | None = None
        self.full = False  # whether the last fetch gave a full batch
        self.to_ack: list[Msg] = []

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: configs, the server, the stream."""
        _check(parse_configs(NatsSourceConfig, configs, what), what)

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Connect, create the durable consumer if missing, bind to it."""
        self.what = describe("source", "nats", context)
        cfg = self.config = parse_configs(NatsSourceConfig, config, self.what)
        self.loop = EventLoop(f"source-{context.get_name()}-nats-loop")
        where = f"{self.what}: NATS at {', '.join(cfg.servers)}"
        self.loop.run(self._open(cfg), _open_bound(cfg), f"{where}: connect and bind the consumer")

    async def _open(self, cfg: NatsSourceConfig) -> None:
        self.nc = await _connect(cfg, self.what)
        js = self.nc.jetstream()
        await _stream_exists(js, cfg.stream, self.what)
        try:
            await js.consumer_info(cfg.stream, cfg.durableName)
        except nats.js.errors.NotFoundError:
            await js.add_consumer(
                cfg.stream,
                ConsumerConfig(
                    durable_name=cfg.durableName,
                    ack_policy=AckPolicy.EXPLICIT,
                    ack_wait=cfg.ackWaitSeconds,
                    max_ack_pending=cfg.maxAckPending,
                    filter_subject=cfg.filterSubject,
                ),
            )
        # Bound to the durable consumer by JetStream's pull API (see .nats_pull): nats-py's
        # fetch spent about 20 us of CPU a message waiting for each on its own.
        self.puller = Puller(self.nc, cfg.stream, cfg.durableName)
        await self.puller.start()

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """Up to ``batchSize`` messages, waiting at most ``fetchTimeoutMs``."""
        if self.loop is None or self.config is None:
            msg = f"{self.what}: read() before open()"
            raise RuntimeError(msg)
        bound = self.config.fetchTimeoutMs / 1000 + JS_TIMEOUT
        with lost_broker(self.what, "NATS", ", ".join(self.config.servers), "fetch", LOST):
            msgs = self.loop.run(self._fetch(self.config), bound, f"{self.what}: fetch")
        return [self._record(m) for m in msgs] or None

    async def _fetch(self, cfg: NatsSourceConfig) -> list[Msg]:
        assert self.puller is not None
        # After a full batch, no wait: the runner acks the batch being appended only
        # once read() returns, and a drained consumer would hold that ack a whole expiry.
        msgs = await self.puller.fetch(cfg.batchSize, cfg.fetchTimeoutMs / 1000, not self.full)
        self.full = len(msgs) >= cfg.batchSize
        return msgs

    def _record(self, msg: Msg) -> Record:
        delivered, stream_seq, nanos = reply_fields(msg)
        props = {"natsSubject": msg.subject, "natsStreamSeq": stream_seq}
        if delivered != "1":
            props["natsDelivered"] = delivered
        headers = msg.headers
        key = None
        if headers:
            props.update(headers)
            key = headers.get("sparkfn-key")
        return NatsRecord(msg.data, key, props, nanos // 1_000_000, msg=msg)

    def ack(self, record: Record) -> None:
        """The message is appended: acked with its batch in ``commit()``."""
        if isinstance(record, NatsRecord) and record.msg is not None:
            self.to_ack.append(record.msg)

    def commit(self) -> None:
        """Ack the batch's messages and flush the acks to the server."""
        if self.to_ack and self.loop is not None and self.config is not None:
            msgs, self.to_ack = self.to_ack, []
            servers = ", ".join(self.config.servers)
            with lost_broker(self.what, "NATS", servers, f"ack {len(msgs)}", LOST):
                self.loop.run(self._ack(msgs), JS_TIMEOUT * 2, f"{self.what}: ack {len(msgs)}")

    async def _ack(self, msgs: list[Msg]) -> None:
        for msg in msgs:
            await msg.ack()
        if self.nc is not None:
            await self.nc.flush(int(JS_TIMEOUT))

    def close(self) -> None:
        """Close the connection and the loop; unacked messages come again after ack wait."""
        self.to_ack = []
        try:
            _disconnect(self.loop, self.nc)
        finally:
            self.nc, self.loop = None, None


class NatsJetStreamSink(Sink):
    """Publishes to ``subject`` with ``Nats-Msg-Id``; ``flush()`` waits for the acks."""

    def __init__(self) -> None:
        self.what = "sink (nats)"
        self.config: NatsSinkConfig | None = None
        self.id_prefix = ""
        self.loop: EventLoop | None = None
        self.nc: Client | None = None
        self.buffer: list[Record] = []
        self.publisher: Publisher | None = None
        self.duplicates = 0

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: configs, the server, the stream if named."""
        _check(parse_configs(NatsSinkConfig, configs, what), what)

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        """Validate and connect."""
        self.what = describe("sink", "nats", context)
        cfg = self.config = parse_configs(NatsSinkConfig, config, self.what)
        self.id_prefix = f"{context.get_tenant()}/{context.get_namespace()}/{context.get_name()}"
        self.loop = EventLoop(f"sink-{context.get_name()}-nats-loop")
        where = f"{self.what}: NATS at {', '.join(cfg.servers)}"
        self.loop.run(self._open(cfg), _open_bound(cfg), f"{where}: connect")

    async def _open(self, cfg: NatsSinkConfig) -> None:
        self.nc = await _connect(cfg, self.what)
        if cfg.stream is not None:
            await _stream_exists(self.nc.jetstream(), cfg.stream, self.what)
        self.publisher = Publisher(self.nc, cfg.subject, PUBLISH_WINDOW)
        await self.publisher.start()

    def write(self, record: Record) -> None:
        """Buffer the record; published in ``flush()``."""
        self.buffer.append(record)

    def flush(self) -> None:
        """Publish the buffer and wait for every ack (duplicates are acked as such)."""
        if self.loop is None or self.config is None or not self.buffer:
            return
        windows = -(-len(self.buffer) // PUBLISH_WINDOW)
        bound = windows * self.config.publishTimeoutMs / 1000 + JS_TIMEOUT
        self.loop.run(self._publish(self.config, self.buffer), bound, f"{self.what}: publish")
        self.buffer = []

    async def _publish(self, cfg: NatsSinkConfig, records: list[Record]) -> None:
        publisher = self.publisher
        assert publisher is not None
        prefix, stream = self.id_prefix, cfg.stream
        before = publisher.duplicates
        try:
            messages = [sink_message(record, prefix, stream) for record in records]
            refused = await publisher.publish(messages, cfg.publishTimeoutMs / 1000)
        except nats.errors.Error as exc:
            msg = (
                f"{self.what}: publishing {len(records)} messages to {cfg.subject!r} failed: "
                f"{type(exc).__name__}: {exc}"
            )
            raise RuntimeError(msg) from exc
        self.duplicates += publisher.duplicates - before
        for record, why in zip(records, refused, strict=True):
            if why is not None:
                msg = (
                    f"{self.what}: publishing {record.topic}@{record.message_id} to "
                    f"{cfg.subject!r} failed: {why}"
                )
                raise RuntimeError(msg)

    def close(self) -> None:
        """Drop what was not flushed (its batch did not commit), disconnect, stop the loop."""
        self.buffer = []
        try:
            _disconnect(self.loop, self.nc)
        finally:
            self.nc, self.loop = None, None
