"""``redis``: a Redis Streams source (consumer group, XACK after the append) and sink (XADD, or SET key value).

::

    sparkfn sources localrun --source-type redis --output events \\
        --source-config '{"redisHosts": "127.0.0.1:6379", "streamName": "events", "groupName": "sparkfn"}'
    sparkfn sinks localrun --sink-type redis --inputs results \\
        --sink-config '{"redisHosts": "127.0.0.1:6379", "streamName": "results"}'

Connection configs are Pulsar IO's Redis connector's: ``redisHosts``
(``host:port``; one host: standalone mode), ``redisPassword``,
``redisDatabase`` (0), ``clientMode`` (``Standalone`` only),
``connectTimeout`` and ``operationTimeout`` (ms). Streams: ``streamName``
(required). Source: ``groupName`` (``sparkfn``), ``consumerName`` (default
``<tenant>.<namespace>.<name>-<instance>``: stable, so a restarted instance
finds its pending entries), ``createGroup`` (``true``: create the group, and
the stream, if missing, reading from ``startId``), ``startId`` (``0``: the
whole stream; ``$``: only new entries), ``batchSize`` (entries per XREADGROUP,
1000), ``blockMs`` (100), ``valueField`` (``value``), ``keyField``
(``key``). Sink: ``streamName`` optional (without it each message is
``SET key value``, as Pulsar's Redis sink writes), ``maxLen`` (approximate
trimming; none by default), and Pulsar's ``batchSize``, ``batchTimeMs``,
``autoReconnect``, ``requestQueue``, ``tcpNoDelay``, accepted without effect
(docs/connectors.md says why), and ``keepAlive`` (TCP keepalive).

**Source guarantee.** Entries are read with XREADGROUP into the group as the
instance's consumer (on a connection of the source's own, whose replies
:mod:`.redis_connection` parses); Redis keeps each in the consumer's pending entries list
until it is acked. sparkfn sends XACK for a batch's entries in ``commit()``,
after the store transaction appending them committed. On start the instance
first re-reads its own pending entries (id ``0``), then new ones (``>``). A
crash between the append and the XACK therefore appends those entries again:
at-least-once, with at most one batch of duplicates per crash; nothing is
lost. Stream ids are not one integer sparkfn could de-duplicate by, so
``effectively_once`` is refused. Limits: entries pending for a consumer name
that no longer runs (parallelism lowered, ``consumerName`` changed) are not
claimed; Redis persistence (AOF/RDB) decides what survives a Redis restart;
``MAXLEN`` trimming by producers can delete entries before they are read.

**Sink guarantee.** Without ``streamName``, ``flush()`` SETs the batch's
keys in one MULTI/EXEC before the batch commits; a replay sets the same
values again (no duplicates); a message without a key is written under
the key ``""``, as Pulsar's sink writes it (each such message replaces the
one before). With it, ``flush()`` XADDs the batch in one MULTI/EXEC
transaction before the batch commits. A replayed batch (crash after the
EXEC, before the commit) adds its entries again with new ids: at-least-once.
Redis has no de-duplication by producer id; each entry carries
``topic`` and ``messageId`` (``partition:offset``) fields, stable across
replays, by which a reader drops duplicates. Fields: ``value``, ``key`` (when
set), ``topic``, ``messageId``, ``eventTime`` (ms, when set),
``properties`` (JSON, when not empty).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import redis
import redis.exceptions
from pydantic import Field, field_validator

from sparkfn.api.connector import Record, Sink, SinkContext, Source, SourceContext, _EndOfStream
from sparkfn.api.errors import ConfigError
from sparkfn.connectors.builtin._broker import BrokerCheck, lost_broker, run_check
from sparkfn.connectors.builtin._config import (
    BuiltinConfig,
    Count,
    PollMs,
    TimeoutMs,
    describe,
    dumps,
    parse_configs,
    payload,
)
from sparkfn.connectors.builtin.redis_connection import LOST, StreamReader, connect
from sparkfn.connectors.builtin.redis_writer import StreamWriter, Xadd, bulk


class RedisConfig(BuiltinConfig):
    """Pulsar IO's Redis connection configs, and the stream."""

    redisHosts: str = Field(min_length=1)
    redisPassword: str | None = None
    redisDatabase: int = Field(default=0, ge=0, le=2147483647)
    clientMode: Literal["Standalone"] = "Standalone"
    connectTimeout: TimeoutMs = 10000
    operationTimeout: TimeoutMs = 10000
    keepAlive: bool = False
    # Pulsar's client settings that redis-py has no counterpart for: accepted,
    # so a Pulsar user's configs work, with the meaning the module docstring gives.
    autoReconnect: bool = True
    requestQueue: int = Field(default=2147483647, ge=1, le=2147483647)
    tcpNoDelay: bool = False

    @field_validator("redisPassword")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        return value or None  # Pulsar's default, "", means none

    @field_validator("redisHosts")
    @classmethod
    def _hosts(cls, value: str) -> str:
        hosts = [h.strip() for h in value.split(",") if h.strip()]
        if len(hosts) != 1:
            msg = "one host:port (clientMode Standalone; Cluster is not supported)"
            raise ValueError(msg)
        host, _, port = hosts[0].rpartition(":")
        if not host or not port.isdigit():
            msg = "must be host:port"
            raise ValueError(msg)
        return hosts[0]


class RedisSourceConfig(RedisConfig):
    """The source's configs."""

    streamName: str = Field(min_length=1)
    groupName: str = Field(default="sparkfn", min_length=1)
    consumerName: str | None = None
    createGroup: bool = True
    startId: str = "0"
    batchSize: Count = 1000
    blockMs: PollMs = 100
    valueField: str = "value"
    keyField: str = "key"


class RedisSinkConfig(RedisConfig):
    """The sink's configs: a stream to XADD to, or (no ``streamName``) Pulsar's keys."""

    streamName: str | None = Field(default=None, min_length=1)
    maxLen: int | None = Field(default=None, ge=1, le=2**63 - 1)
    batchSize: Count = 200
    batchTimeMs: TimeoutMs = 1000


def _check(cfg: RedisConfig, what: str, prepare: bool) -> None:
    """Connect (and prepare the group) within :data:`~._broker.CHECK_SECONDS` in all."""
    capped = cfg.model_copy(
        update={
            "connectTimeout": BrokerCheck.cap_ms(cfg.connectTimeout),
            "operationTimeout": BrokerCheck.cap_ms(cfg.operationTimeout),
        }
    )

    def check(progress: BrokerCheck) -> None:
        client = connect(capped, what)
        try:
            if prepare:
                assert isinstance(capped, RedisSourceConfig)
                progress.step = f"prepare group {capped.groupName!r}"
                _prepare_group(client, capped, what)
        finally:
            client.close()

    run_check(what, "Redis", cfg.redisHosts, check)


def _socket_options(cfg: RedisConfig) -> dict[str, Any]:
    """How the source's reader and the sink's writer open their own socket to Redis."""
    host, _, port = cfg.redisHosts.rpartition(":")
    return {
        "host": host,
        "port": int(port),
        "password": cfg.redisPassword,
        "db": cfg.redisDatabase,
        "connect_timeout": cfg.connectTimeout / 1000,
        "timeout": cfg.operationTimeout / 1000,
        "keepalive": cfg.keepAlive,
    }


def _prepare_group(client: redis.Redis, cfg: RedisSourceConfig, what: str) -> None:
    """Create the group if asked; otherwise check that stream and group exist."""
    if cfg.createGroup:
        try:
            client.xgroup_create(cfg.streamName, cfg.groupName, id=cfg.startId, mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                msg = f"{what}: configs.groupName/startId: cannot create group: {exc}"
                raise ConfigError(msg) from None
        return
    if not client.exists(cfg.streamName):
        msg = f"{what}: configs.streamName: stream {cfg.streamName!r} does not exist"
        raise ConfigError(msg)
    groups = {g["name"].decode() for g in client.xinfo_groups(cfg.streamName)}
    if cfg.groupName not in groups:
        msg = (
            f"{what}: configs.groupName: stream {cfg.streamName!r} has no group "
            f"{cfg.groupName!r} (set createGroup true to create it)"
        )
        raise ConfigError(msg)


@dataclass
class RedisRecord(Record):
    """An entry of the stream: its id, acked after the append."""

    entry_id: bytes = b""


class RedisStreamSource(Source):
    """Reads ``streamName`` as a consumer of ``groupName``; XACKs after the append."""

    def __init__(self) -> None:
        self.what = "source (redis)"
        self.config: RedisSourceConfig | None = None
        self.client: redis.Redis | None = None
        self.reader: StreamReader | None = None  # XREADGROUP's connection
        self.consumer = ""
        self.cursor = "0"  # our pending entries after this id first; then ">": new ones
        self.full = False  # whether the last read gave a full batch
        self.to_ack: list[bytes] = []
        self._value_field = b"value"

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: configs, the server, the stream and group."""
        _check(parse_configs(RedisSourceConfig, configs, what), what, prepare=True)

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Connect and join the group; pending entries of this consumer are read first."""
        self.what = describe("source", "redis", context)
        cfg = self.config = parse_configs(RedisSourceConfig, config, self.what)
        name = f"{context.get_tenant()}.{context.get_namespace()}.{context.get_name()}"
        self.consumer = cfg.consumerName or f"{name}-{context.get_instance_id()}"
        if cfg.consumerName and context.get_num_instances() > 1:
            self.consumer = f"{cfg.consumerName}-{context.get_instance_id()}"
        self._value_field = cfg.valueField.encode()
        self.client = connect(cfg, self.what)
        _prepare_group(self.client, cfg, self.what)
        with lost_broker(self.what, "Redis", cfg.redisHosts, "connect", LOST):
            self.reader = StreamReader(**_socket_options(cfg), value_field=self._value_field)
        self.cursor = "0"

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """Up to ``batchSize`` entries: pending ones first, then new ones (blocking ``blockMs``)."""
        cfg, reader = self.config, self.reader
        if cfg is None or reader is None:
            msg = f"{self.what}: read() before open()"
            raise RuntimeError(msg)
        pending = self.cursor != ">"
        # After a full batch the stream may be drained: no BLOCK then, so that an empty
        # answer comes at once (the runner acks the batch being appended only once read()
        # returns; a block would hold that ack up to blockMs).
        block = None if pending or self.full else cfg.blockMs
        # On a connection of its own, parsed by us (see .redis_reader): redis-py's parsing
        # cost as much CPU as the rest of the source's work together.
        with lost_broker(self.what, "Redis", cfg.redisHosts, "XREADGROUP", LOST):
            ids, values = reader.xreadgroup_columns(cfg.groupName, self.consumer, cfg.streamName,
                                                    self.cursor, cfg.batchSize, block)  # fmt: skip
        self.full = len(ids) >= cfg.batchSize
        if pending:
            # Our pending entries come back until they are acked: read on
            # after each batch, and switch to new entries once none is left.
            if not ids:
                # On to new entries in this same call: a None would have the runner
                # wait its poll interval first (50 ms at the start of every run).
                self.cursor = ">"
                return self.read()
            self.cursor = ids[-1].decode()
        stream = cfg.streamName
        records: list[Record] = []
        add = records.append
        # Objects the interpreter's collector tracks, per entry: the record alone (an
        # entry's tuple and list came and went too; they made a collection every ~150
        # entries, 15% of a run's wall time).
        for entry_id, value in zip(ids, values, strict=True):
            if type(value) is bytes:
                # The common entry, a value alone: no field names to decode, no other
                # properties.
                text_id = entry_id.decode()
                millis = int(text_id[: text_id.index("-")])
                props = {"redisStream": stream, "redisId": text_id}
                add(RedisRecord(value, None, props, millis, entry_id=entry_id))
            elif isinstance(value, list) and value:
                add(self._record(entry_id, value))
            # else: deleted while pending
        return records or None

    def _record(self, entry_id: bytes, fields: list[bytes]) -> Record:
        """An entry of other fields than the value alone; ``fields`` as Redis sends them."""
        cfg = self.config
        assert cfg is not None
        decoded = {fields[i].decode(errors="replace"): fields[i + 1]
                   for i in range(0, len(fields) - 1, 2)}  # fmt: skip
        key_bytes = decoded.pop(cfg.keyField, None)
        value: Any
        if cfg.valueField in decoded:
            value = decoded.pop(cfg.valueField)
            props = {k: v.decode(errors="replace") for k, v in decoded.items()}
        else:  # no value field: the whole entry as a JSON object
            value = dumps({k: v.decode(errors="replace") for k, v in decoded.items()})
            props = {}
        props["redisStream"] = cfg.streamName
        props["redisId"] = entry_id.decode()
        key = key_bytes.decode(errors="replace") if key_bytes is not None else None
        millis = int(entry_id.split(b"-")[0])
        return RedisRecord(value, key, props, millis, entry_id=entry_id)

    def ack(self, record: Record) -> None:
        """The entry is appended: XACKed with its batch in ``commit()``."""
        if isinstance(record, RedisRecord):
            self.to_ack.append(record.entry_id)

    def commit(self) -> None:
        """XACK the batch's entries."""
        cfg = self.config
        if self.to_ack and self.reader is not None and cfg is not None:
            with lost_broker(self.what, "Redis", cfg.redisHosts, "XACK", LOST):
                self.reader.xack(cfg.streamName, cfg.groupName, self.to_ack)
        self.to_ack = []

    def close(self) -> None:
        """Disconnect; entries not acked stay pending for this consumer."""
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self.client is not None:
            self.client.close()
            self.client = None


class RedisStreamSink(Sink):
    """XADDs every record to ``streamName`` or, without one, SETs each record's key to
    its value as Pulsar's Redis sink does; ``flush()`` runs the batch as one transaction."""

    def __init__(self) -> None:
        self.what = "sink (redis)"
        self.config: RedisSinkConfig | None = None
        self.client: redis.Redis | None = None
        # The batch's commands, laid out and sent by sparkfn (see .redis_writer).
        self.writer: StreamWriter | None = None
        self.buffer: list[bytes] = []
        self._xadd: Xadd | None = None  # XADD <stream> [MAXLEN ~ <n>] *

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: configs and the server."""
        _check(parse_configs(RedisSinkConfig, configs, what), what, prepare=False)

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        """Validate and connect."""
        self.what = describe("sink", "redis", context)
        cfg = self.config = parse_configs(RedisSinkConfig, config, self.what)
        if cfg.streamName is not None:
            trim = ("MAXLEN", "~", str(cfg.maxLen)) if cfg.maxLen is not None else ()
            self._xadd = Xadd(("XADD", cfg.streamName, *trim, "*"))
        self.client = connect(cfg, self.what)  # its errors name a refused password or database
        with lost_broker(self.what, "Redis", cfg.redisHosts, "connect", LOST):
            self.writer = StreamWriter(**_socket_options(cfg))

    def write(self, record: Record) -> None:
        """Buffer the entry's command: XADD with its fields (or SET of its key)."""
        value = payload(record.value)
        if self._xadd is None:
            # A message without a key is SET under "", as Pulsar's sink writes it.
            self.buffer.append(b"*3\r\n$3\r\nSET\r\n%s%s" % (bulk(record.key or ""), bulk(value)))
            return
        props = json.dumps(record.properties, sort_keys=True) if record.properties else None
        self.buffer.append(self._xadd.pack(value, record.topic or "", record.message_id or "",
                                           record.key, record.event_time, props))  # fmt: skip

    def flush(self) -> None:
        """XADD (or SET) the buffer in one MULTI/EXEC."""
        if self.writer is None or not self.buffer:
            return
        self.writer.transaction(self.buffer)
        self.buffer = []

    def close(self) -> None:
        """Drop what was not flushed (its batch did not commit) and disconnect."""
        self.buffer = []
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.client is not None:
            self.client.close()
            self.client = None
