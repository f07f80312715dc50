"""``mqtt``: an MQTT source (QoS 1, persistent session, PUBACK after the append) and sink (paho-mqtt).

::

    sparkfn sources localrun --source-type mqtt --output readings \\
        --source-config '{"host": "127.0.0.1", "topicFilters": ["sensors/+/temp"], "clientId": "readings"}'
    sparkfn sinks localrun --sink-type mqtt --inputs alerts \\
        --sink-config '{"host": "127.0.0.1", "topic": "alerts/out"}'

Both (MQTT 3.1.1): ``host`` (required), ``port`` (1883), ``username``,
``password``, ``keepAliveSeconds`` (60), ``connectTimeoutMs`` (5000),
``qos`` (1; 2 is accepted too). Source: ``topicFilters`` (required: a list,
or a comma-separated string; wildcards ``+``/``#``), ``clientId`` (default
``sparkfn-<tenant>-<namespace>-<name>-<instance>``: fixed, so that the broker
keeps the session), ``cleanSession`` (``false``), ``batchSize`` (1000),
``readTimeoutMs`` (100). Sink: ``topic`` (required), ``retain`` (``false``),
``clientId`` (default: the broker's choice).

**Source guarantee.** The source connects with ``cleanSession`` false under
a fixed ``clientId`` and subscribes with QoS 1, so the broker keeps the
subscription and queues messages while the source is away. Acks are manual
(paho's ``manual_ack``): a message's PUBACK is sent in ``commit()``, after
the store transaction appending it committed. After a crash the broker
re-sends the messages it sent but got no PUBACK for, when the same client id
reconnects. At-least-once: what was appended but not acked comes again
(duplicates; MQTT 3.1.1 has no message id that sparkfn could de-duplicate
by, so ``effectively_once`` is refused). **What it cannot promise:** the
broker bounds what it keeps for a session (Mosquitto: ``max_queued_messages``,
1000 by default, and ``max_inflight_messages``, 20): messages beyond that
bound are dropped by the broker, not by sparkfn, when the source falls
behind or is down; raise the bound on the broker. A persistent session
survives a broker restart only with the broker's persistence on. A lost
connection ends the instance (no silent reconnect that could mix acks of
two connections) with a ``BrokerUnreachableError``: a failure, which the
source's failure policy answers (by default a new instance after a backoff).

**Sink guarantee.** Each record is published with ``qos`` to ``topic``;
``flush()`` waits until the broker acknowledged every publish (PUBACK, or
PUBCOMP for QoS 2) before the batch commits. A replayed batch publishes
again: at-least-once, duplicates possible. Each message has no id MQTT 3.1.1
can carry; readers that must drop duplicates need one in the payload.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from pydantic import Field, field_validator

from sparkfn.api.connector import Record, Sink, SinkContext, Source, SourceContext, _EndOfStream
from sparkfn.api.errors import BrokerUnreachableError, ConfigError
from sparkfn.connectors.builtin._broker import BrokerCheck, run_check
from sparkfn.connectors.builtin._config import (
    MAX_ITEMS,
    BuiltinConfig,
    Count,
    PollMs,
    TimeoutMs,
    describe,
    parse_configs,
    payload,
    split_list,
)


class MqttConfig(BuiltinConfig):
    """Connection configs."""

    host: str = Field(min_length=1)
    port: int = Field(default=1883, ge=1, le=65535)
    username: str | None = None
    password: str | None = None
    keepAliveSeconds: int = Field(default=60, ge=1, le=65535)  # MQTT's largest
    connectTimeoutMs: TimeoutMs = 5000
    qos: int = Field(default=1, ge=1, le=2)
    clientId: str | None = Field(default=None, min_length=1)


class MqttSourceConfig(MqttConfig):
    """The source's configs."""

    topicFilters: list[str] = Field(min_length=1, max_length=MAX_ITEMS)
    cleanSession: bool = False
    batchSize: Count = 1000
    readTimeoutMs: PollMs = 100

    @field_validator("topicFilters", mode="before")
    @classmethod
    def _filters(cls, value: Any) -> Any:
        return split_list(value)


class MqttSinkConfig(MqttConfig):
    """The sink's configs."""

    topic: str = Field(min_length=1)
    retain: bool = False

    @field_validator("topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        if "+" in value or "#" in value:
            msg = "a topic to publish to has no wildcards"
            raise ValueError(msg)
        return value


class Connection:
    """A paho client connected (with its network thread running) or a :class:`ConfigError`."""

    def __init__(
        self,
        cfg: MqttConfig,
        what: str,
        client_id: str,
        clean_session: bool,
        manual_ack: bool,
        on_message: Any = None,
    ) -> None:
        self.cfg = cfg
        self.what = what
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=clean_session,
            reconnect_on_failure=False,
            manual_ack=manual_ack,
        )
        self.client.connect_timeout = cfg.connectTimeoutMs / 1000  # the TCP connect's
        if cfg.username is not None:
            self.client.username_pw_set(cfg.username, cfg.password)
        self.connected = threading.Event()
        self.reason: Any = None
        self.lost: str | None = None
        self.closing = False
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        # Before the connect: a persistent session's queued messages come
        # right after CONNACK, and paho drops what arrives without a callback.
        self.client.on_message = on_message
        self.on_lost: Any = None
        where = f"{cfg.host}:{cfg.port}"
        try:
            self.client.connect(cfg.host, cfg.port, cfg.keepAliveSeconds)
        except OSError as exc:
            msg = (
                f"{what}: configs.host/port: cannot reach the MQTT broker at {where} "
                f"(step: connect): {exc}"
            )
            raise BrokerUnreachableError(msg) from None
        self.client.loop_start()
        answered = self.connected.wait(cfg.connectTimeoutMs / 1000)
        reason: Any = self.reason
        if not answered or reason is None:
            self.close()
            msg = (
                f"{what}: configs.host/port: the MQTT broker at {where} did not answer "
                f"within {cfg.connectTimeoutMs} ms (step: connect)"
            )
            raise BrokerUnreachableError(msg)
        if reason.is_failure:
            self.close()
            msg = (
                f"{what}: configs.username/password/clientId: the MQTT broker at {where} "
                f"refused the connection: {reason}"
            )
            raise ConfigError(msg)

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self.reason = reason
        self.connected.set()

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if not self.closing:
            self.lost = str(reason)
            if self.on_lost is not None:
                self.on_lost(reason)
        self.connected.set()

    def close(self) -> None:
        """Disconnect and stop the network thread."""
        self.closing = True
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()


def _check(cfg: MqttConfig, what: str) -> None:
    """Connect with a throw-away clean session, within :data:`~._broker.CHECK_SECONDS`."""
    capped = cfg.model_copy(update={"connectTimeoutMs": BrokerCheck.cap_ms(cfg.connectTimeoutMs)})
    run_check(
        what,
        "MQTT",
        f"{cfg.host}:{cfg.port}",
        lambda _: Connection(capped, what, "", True, False).close(),
    )


@dataclass
class MqttRecord(Record):
    """A message received with QoS > 0: its packet id, PUBACKed after the append."""

    mid: int = 0
    qos: int = 0


class MqttSource(Source):
    """Subscribes with a persistent session; PUBACKs messages once they are appended."""

    def __init__(self) -> None:
        self.what = "source (mqtt)"
        self.config: MqttSourceConfig | None = None
        self.connection: Connection | None = None
        self.context: SourceContext | None = None
        self.arrived: queue.SimpleQueue[Record] = queue.SimpleQueue()
        self.to_ack: list[MqttRecord] = []
        self.subscribed = threading.Event()
        self.refused: list[str] = []

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: configs and the broker (with a throw-away clean session)."""
        _check(parse_configs(MqttSourceConfig, configs, what), what)

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Connect with the fixed client id and subscribe to every filter."""
        self.what = describe("source", "mqtt", context)
        self.context = context
        cfg = self.config = parse_configs(MqttSourceConfig, config, self.what)
        client_id = cfg.clientId or (
            f"sparkfn-{context.get_tenant()}-{context.get_namespace()}-{context.get_name()}"
        )
        client_id = f"{client_id}-{context.get_instance_id()}"
        connection = self.connection = Connection(
            cfg, self.what, client_id, cfg.cleanSession, True, on_message=self._on_message
        )
        connection.client.on_subscribe = self._on_subscribe
        result, _ = connection.client.subscribe([(f, cfg.qos) for f in cfg.topicFilters])
        if result != MQTTErrorCode.MQTT_ERR_SUCCESS or not self.subscribed.wait(
            cfg.connectTimeoutMs / 1000
        ):
            msg = f"{self.what}: configs.topicFilters: subscribing failed ({result})"
            raise ConfigError(msg)
        if self.refused:
            msg = f"{self.what}: configs.topicFilters: the broker refused {', '.join(self.refused)}"
            raise ConfigError(msg)

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        assert self.config is not None
        self.refused = [
            f for f, c in zip(self.config.topicFilters, codes, strict=False) if c.is_failure
        ]
        self.subscribed.set()

    def _on_message(self, client: Any, userdata: Any, message: paho.MQTTMessage) -> None:
        props = {"mqttTopic": message.topic}
        if message.dup:
            props["mqttDup"] = "true"
        self.arrived.put(
            MqttRecord(
                value=bytes(message.payload),
                properties=props,
                mid=message.mid,
                qos=message.qos,
            )
        )

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """What arrived, up to ``batchSize``; waits ``readTimeoutMs`` for the first."""
        cfg = self.config
        if cfg is None:
            msg = f"{self.what}: read() before open()"
            raise RuntimeError(msg)
        self._check_connection(cfg)
        records: list[Record] = []
        try:
            records.append(self.arrived.get(timeout=cfg.readTimeoutMs / 1000))
            while len(records) < cfg.batchSize:
                records.append(self.arrived.get_nowait())
        except queue.Empty:
            pass
        return records or None

    def _check_connection(self, cfg: MqttSourceConfig) -> None:
        """A lost connection ends the instance (read on the runner's thread, not the network
        thread's): its failure policy opens a new one, to which the broker re-sends what was
        not acknowledged. Acks of two connections never mix."""
        lost = self.connection.lost if self.connection is not None else None
        if lost is not None:
            msg = (
                f"{self.what}: lost the MQTT broker at {cfg.host}:{cfg.port} "
                f"(step: receive): {lost}"
            )
            raise BrokerUnreachableError(msg)

    def ack(self, record: Record) -> None:
        """The message is appended: PUBACKed in ``commit()``."""
        if isinstance(record, MqttRecord) and record.qos > 0:
            self.to_ack.append(record)

    def commit(self) -> None:
        """Send the batch's PUBACKs (PUBREC for QoS 2)."""
        if self.connection is None or self.config is None:
            return
        # Never on another connection than the one that delivered them (paho reconnects).
        self._check_connection(self.config)
        for record in self.to_ack:
            self.connection.client.ack(record.mid, record.qos)
        self.to_ack = []

    def close(self) -> None:
        """Disconnect; what was not acked is re-sent by the broker to the next connection."""
        self.to_ack = []
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class MqttSink(Sink):
    """Publishes to ``topic`` with ``qos``; ``flush()`` waits for the broker's acks."""

    def __init__(self) -> None:
        self.what = "sink (mqtt)"
        self.config: MqttSinkConfig | None = None
        self.connection: Connection | None = None
        self.buffer: list[Record] = []

    @classmethod
    def check_configs(cls, configs: Mapping[str, Any], what: str) -> None:
        """Before the run: configs and the broker."""
        _check(parse_configs(MqttSinkConfig, configs, what), what)

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:
        """Validate and connect."""
        self.what = describe("sink", "mqtt", context)
        cfg = self.config = parse_configs(MqttSinkConfig, config, self.what)
        client_id = f"{cfg.clientId}-{context.get_instance_id()}" if cfg.clientId else ""
        self.connection = Connection(cfg, self.what, client_id, True, False)

    def write(self, record: Record) -> None:
        """Buffer the record; published in ``flush()``."""
        self.buffer.append(record)

    def flush(self) -> None:
        """Publish the buffer and wait until the broker acknowledged every message."""
        cfg, connection = self.config, self.connection
        if cfg is None or connection is None or not self.buffer:
            return
        client = connection.client
        infos = [
            client.publish(cfg.topic, payload(r.value), cfg.qos, cfg.retain) for r in self.buffer
        ]
        timeout = max(cfg.connectTimeoutMs / 1000, 1.0)
        for info in infos:
            if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                msg = (
                    f"{self.what}: publishing to {cfg.topic!r} failed: {paho.error_string(info.rc)}"
                )
                raise RuntimeError(msg)
            info.wait_for_publish(timeout)
            if not info.is_published():
                lost = f" (connection lost: {connection.lost})" if connection.lost else ""
                msg = f"{self.what}: the broker did not acknowledge a publish in {timeout} s{lost}"
                raise RuntimeError(msg)
        self.buffer.clear()

    def close(self) -> None:
        """Drop what was not flushed (its batch did not commit) and disconnect."""
        self.buffer.clear()
        if self.connection is not None:
            self.connection.close()
            self.connection = None
