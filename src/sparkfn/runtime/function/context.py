"""The :class:`~sparkfn.api.context.Context` a function instance is given."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from sparkfn.api.context import Context
from sparkfn.api.errors import ConfigError
from sparkfn.api.message_id import MessageId
from sparkfn.api.publish import Publication, PublishCallback, Result
from sparkfn.config.names import TopicName
from sparkfn.config.topics_pattern import TopicsPattern
from sparkfn.runtime.function.emit import Emitted
from sparkfn.runtime.function.logs import FunctionLogFile, log_file
from sparkfn.runtime.function.redelivery import redeliveries
from sparkfn.runtime.function.rows import TRIGGER_PROPERTY, InputRows, without_partition
from sparkfn.runtime.function.secrets import secrets_provider

if TYPE_CHECKING:
    from sparkfn.runtime.function.instance import FunctionInstance

FatalOrigin = Literal["fatal", "connector"]
"""Where a fatal error came from, as stored with the death: ``context.fatal``
called by the function, or an exception a connector raised."""


def function_id(fqfn: str) -> str:
    """Function ``fqfn``'s id, a UUID as Pulsar's is (derived from the name, so stable)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"sparkfn:function:{fqfn}"))


class _LogCapture(logging.Handler):
    """Turns a function's log records into messages for its log topic."""

    def __init__(self, instance: FunctionInstance) -> None:
        super().__init__(logging.INFO)
        self.instance = instance

    def emit(self, record: logging.LogRecord) -> None:
        inst = self.instance
        if inst.config.log_topic is None:
            return
        properties = {
            "level": record.levelname,
            "function": inst.config.fqfn,
            "instance_id": str(inst.instance_id),
        }
        message_id = inst.context.current_message_id()
        if message_id is not None:
            properties["message_id"] = message_id
        inst.emit_log(
            Emitted("log", inst.config.log_topic, self.format(record).encode(), None, properties)
        )


class FunctionContext(Context):
    """The Context of one function instance; message methods refer to the current message."""

    def __init__(self, instance: FunctionInstance) -> None:
        self._inst = instance
        self._rows: InputRows | None = None
        self.index = -1
        cfg = instance.config
        # A logger of this context's own, not the registry's: two instances of
        # one name (two versions, two harnesses) must not share a log capture.
        self._logger = logging.Logger(
            f"sparkfn.function.{cfg.fqfn}.{instance.instance_id}", logging.INFO
        )
        self._logger.parent = logging.getLogger("sparkfn.function")
        self._logger.addHandler(_LogCapture(instance))
        if instance.data_dir is not None:
            path = log_file(instance.data_dir, cfg.fqfn, instance.instance_id)
            self._logger.addHandler(FunctionLogFile(path, cfg.fqfn, instance.instance_id))
        self._secrets: Any = None  # the secrets provider, made on first use
        # The publish callbacks of the message's current attempt: called when
        # it succeeds (run_callbacks), dropped when it fails.
        self.callbacks: list[PublishCallback] = []
        # (topic, message id) of the messages context.ack acknowledged in the current
        # attempt (auto_ack false: the others are redelivered).
        self.acked: set[tuple[str | None, str | None]] = set()

    def close_log_files(self) -> None:
        """Close the instance's log file (what is logged after it reopens it)."""
        for handler in self._logger.handlers:
            if isinstance(handler, FunctionLogFile):
                handler.close()

    def fatal(self, exc: BaseException) -> None:
        """Terminate this instance with ``exc`` (PIP-297); see :meth:`Context.fatal`."""
        self._inst.fatal(exc, "fatal")

    def fatal_from(self, origin: FatalOrigin, exc: BaseException) -> None:
        """:meth:`fatal`, with the death recorded as coming from ``origin``.

        A connector run as a function (the sink adapter) reports the
        exceptions its connector raises with ``origin="connector"``.
        """
        self._inst.fatal(exc, origin)

    # internal: binding to the current message
    def bind(self, rows: InputRows | None, index: int) -> None:
        """Point message methods at row ``index`` of ``rows``."""
        self._rows = rows
        self.index = index

    def current_message_id(self) -> str | None:
        """``partition:offset`` of the current message, if any."""
        if self._rows is None or self.index < 0:
            return None
        return self._rows.message_id(self.index)

    def _field(self, name: str) -> Any:
        if self._rows is None or self.index < 0:
            return None
        return self._rows.column(name)[self.index]

    # --- the current message -------------------------------------------
    def get_message_id(self) -> MessageId | None:
        """The current message's id (``str()``: ``partition:offset``)."""
        if self._rows is None or self.index < 0:
            return None
        return MessageId(self._field("partition"), self._field("offset"))

    def get_message_partition_index(self) -> int | None:
        """The partition of the current message."""
        return self._field("partition")  # type: ignore[no-any-return]

    def get_message_sequence_id(self) -> int | None:
        """The current message's offset in its partition."""
        return self._field("offset")  # type: ignore[no-any-return]

    def get_message_key(self) -> str:
        """The current message's key; ``""`` for none, as Pulsar's client gives it."""
        return self._field("key") or ""

    def get_message_eventtime(self) -> int:
        """The current message's event time in ms since the epoch; 0 for none, as Pulsar's."""
        value = self._field("event_time")
        return 0 if value is None else int(value.timestamp() * 1000)

    def get_message_properties(self) -> dict[str, str]:
        """The current message's properties (a trigger's own is not among them)."""
        found = dict(self._field("properties") or [])
        found.pop(TRIGGER_PROPERTY, None)
        return found

    def get_message_redelivery_count(self) -> int:
        """How many times the current message was delivered before (0: its first delivery)."""
        if self._rows is None or self.index < 0:
            return 0
        return redeliveries(self._rows, self.index)

    def get_current_message_topic_name(self) -> str:
        """``persistent://tenant/ns/topic`` of the current message, with
        ``-partition-N`` for a topic of several partitions, as Pulsar names it."""
        if self._rows is None or self.index < 0:
            return ""
        return self._rows.topic_name(self.index)

    def get_partition_key(self) -> str:
        """The current message's key; ``""`` for none."""
        return self.get_message_key()

    # --- the function ----------------------------------------------------
    def get_function_tenant(self) -> str:
        """The function's tenant."""
        return self._inst.config.tenant

    def get_function_namespace(self) -> str:
        """The function's namespace."""
        return self._inst.config.namespace

    def get_function_name(self) -> str:
        """The function's name."""
        return self._inst.config.name

    def get_function_id(self) -> str:
        """The function's id: a UUID, the same for every instance and run of the function."""
        return function_id(self._inst.config.fqfn)

    def get_function_version(self) -> str:
        """The function's version."""
        return self._inst.version

    def get_instance_id(self) -> int:
        """This instance's id."""
        return self._inst.instance_id

    def get_num_instances(self) -> int:
        """The function's parallelism."""
        return self._inst.config.parallelism

    def get_input_topics(self) -> list[str]:
        """The input topics, ``persistent://tenant/ns/topic`` (and ``topics_pattern``, if any)."""
        config = self._inst.config
        topics = [f"persistent://{topic}" for topic in config.inputs]
        return topics + [config.topics_pattern] if config.topics_pattern else topics

    def get_output_topic(self) -> str | None:
        """The output topic, ``persistent://tenant/ns/topic``."""
        output = self._inst.config.output
        return None if output is None else f"persistent://{output}"

    def get_output_serde_class_name(self) -> str | None:
        """The output serde's class name, or the output topic's encoding."""
        config = self._inst.config
        if config.output is None:
            return None
        serde = self._inst.serdes.output_for(config.output)
        if serde.custom is not None or serde.record is not None:
            return config.output_serde
        return "serde.IdentitySerDe" if serde.kind == "identity" else serde.kind

    def get_logger(self) -> logging.Logger:
        """This instance's logger."""
        return self._logger

    # --- configuration -----------------------------------------------------
    def get_user_config_value(self, key: str) -> Any:
        """One ``user_config`` value or ``None``."""
        return self._inst.config.user_config.get(key)

    def get_user_config_map(self) -> Mapping[str, Any]:
        """The ``user_config`` mapping."""
        return dict(self._inst.config.user_config)

    def get_secret(self, secret_name: str) -> Any:
        """The secret, as the function's secrets provider resolves its configured value."""
        config = self._inst.config
        spec = config.secrets.get(secret_name)
        if spec is None:
            return None
        if self._secrets is None:
            self._secrets = secrets_provider(
                config.fqfn,
                config.secrets_provider_classname,
                self._inst.user.pulsar,
                config.secrets_provider_config,
            )
        return self._secrets.provide_secret(secret_name, spec)

    # --- output ------------------------------------------------------------
    def _publish(self, publication: Publication) -> None:
        """Encode and buffer a publish; committed with the current message.

        The topic must exist (else a :class:`~sparkfn.api.errors.TopicNotFoundError`
        naming the function and the topic: a message error like any other),
        unless the function's ``auto_create_topics`` lets it be created here.
        """
        inst = self._inst
        topic = str(TopicName.parse(publication.topic_name, field="publish topic"))
        if publication.serde_class_name is None:
            data = inst.serdes.output_for(topic).encode(publication.message)
        else:
            data = inst.serdes.encode_with(publication.serde_class_name, topic, publication.message)
        inst.emit(
            Emitted(
                "publish",
                topic,
                data,
                publication.key,
                publication.properties,
                publication.event_time,
            )
        )
        if publication.callback is not None:
            self.callbacks.append(publication.callback)

    def run_callbacks(self) -> None:
        """The message's attempt succeeded: tell its publish callbacks ``Result.Ok``.

        A callback that raises is logged; the message stays processed.
        """
        callbacks = list(self.callbacks)
        self.callbacks.clear()
        for callback in callbacks:
            try:
                callback(Result.Ok, None)
            except Exception:
                self._logger.exception("publish callback %r failed", callback)

    def record_metric(self, metric_name: str, metric_value: float) -> None:
        """Observe a user metric value."""
        self._inst.pending_metrics.append((metric_name, float(metric_value)))

    def ack(self, msgid: Any, topic: str) -> None:
        """Acknowledge message ``msgid`` of input ``topic`` (``ValueError`` if not an input).

        With ``auto_ack`` (the default) every message is acknowledged when
        ``process`` returns, so this only checks the topic. Without it, a
        message ``process`` did not acknowledge this way during its call is
        redelivered (see :func:`~sparkfn.runtime.function.attempts.attempt_each`).
        The acknowledgement takes effect with the batch's commit.
        """
        config = self._inst.config
        name = without_partition(str(topic))
        try:
            name = str(TopicName.parse(name))
        except ConfigError:
            name = ""
        pattern = config.topics_pattern
        if name and (
            name in config.inputs or (pattern and TopicsPattern.parse(pattern).matches(name))
        ):
            self.acked.add((name, str(msgid)))
            return
        msg = f"Invalid topicname {topic}"
        raise ValueError(msg)

    def acked_current(self) -> bool:
        """Whether the current message was acknowledged with :meth:`ack`."""
        return (self._field("topic"), self.current_message_id()) in self.acked

    # --- state -------------------------------------------------------------
    def incr_counter(self, key: str, amount: int) -> None:
        """Add to a counter."""
        self._inst.state.incr_counter(key, int(amount))

    def get_counter(self, key: str) -> int:
        """A counter's value."""
        return self._inst.state.get_counter(key)

    def del_counter(self, key: str) -> None:
        """Delete a counter."""
        self._inst.state.delete(key)

    def put_state(self, key: str, value: str | bytes) -> None:
        """Set a state value."""
        data = value.encode() if isinstance(value, str) else bytes(value)
        self._inst.state.put_state(key, data)

    def get_state(self, key: str) -> bytes | None:
        """A state value."""
        return self._inst.state.get_state(key)

    def del_state(self, key: str) -> None:
        """Delete a state value."""
        self._inst.state.delete(key)
