"""The Context a function receives: Pulsar's Python Context, method for method.

A function written for Pulsar calls the same methods with the same meaning.
The context is bound to one function instance; message methods refer to the
message being processed. State and counters go to the function's key space in
the store: reads see what earlier batches committed plus this instance's own
writes; writes become visible to others when the batch commits, atomically
with its outputs. Everything a failed ``process`` call emitted or changed is
discarded.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from sparkfn.api.message_id import MessageId
from sparkfn.api.publish import Publication, read_publish


class Context(ABC):
    """What a function can ask about and do (Pulsar names)."""

    # --- the current message -------------------------------------------
    @abstractmethod
    def get_message_id(self) -> MessageId | None:
        """The current message's id; ``str()`` of it is ``partition:offset``.

        ``None`` outside a message (in ``initialize``, or in a vectorized call).
        """

    @abstractmethod
    def get_message_partition_index(self) -> int | None:
        """The partition of its topic the current message came from."""

    @abstractmethod
    def get_message_sequence_id(self) -> int | None:
        """The current message's position in its partition (its offset), as Pulsar's
        sequence id is its position: it grows with every message of the partition."""

    @abstractmethod
    def get_message_key(self) -> str:
        """The current message's key; ``""`` when it has none (as Pulsar's client)."""

    @abstractmethod
    def get_message_eventtime(self) -> int:
        """The current message's event time, in milliseconds since the epoch; 0 when it has none."""

    @abstractmethod
    def get_message_properties(self) -> dict[str, str]:
        """The current message's properties."""

    def get_message_redelivery_count(self) -> int:
        """How many times the current message was delivered before (0: its first delivery);
        Pulsar's ``Message.getRedeliveryCount()``. A message whose call raised is
        delivered again after ``negative_ack_redelivery_delay_ms`` (``max_message_retries``)."""
        return 0

    @abstractmethod
    def get_current_message_topic_name(self) -> str:
        """The topic the current message came from (``persistent://tenant/ns/topic``)."""

    @abstractmethod
    def get_partition_key(self) -> str:
        """The current message's partition key (its key); ``""`` when it has none."""

    # --- the function ----------------------------------------------------
    @abstractmethod
    def get_function_tenant(self) -> str:
        """The function's tenant."""

    @abstractmethod
    def get_function_namespace(self) -> str:
        """The function's namespace."""

    @abstractmethod
    def get_function_name(self) -> str:
        """The function's name."""

    @abstractmethod
    def get_function_id(self) -> str:
        """A stable id of the function: a UUID, as Pulsar's is."""

    @abstractmethod
    def get_function_version(self) -> str:
        """The function's version."""

    @abstractmethod
    def get_instance_id(self) -> int:
        """This instance's id, ``0 .. get_num_instances() - 1``."""

    @abstractmethod
    def get_num_instances(self) -> int:
        """How many instances the function has (its parallelism)."""

    @abstractmethod
    def get_input_topics(self) -> list[str]:
        """The function's input topics, ``persistent://tenant/ns/topic``."""

    @abstractmethod
    def get_output_topic(self) -> str | None:
        """The function's output topic, ``persistent://tenant/ns/topic``, if any."""

    @abstractmethod
    def get_output_serde_class_name(self) -> str | None:
        """The class name of the serde that encodes the output (``serde.IdentitySerDe``
        under Pulsar compatibility), or the output's encoding (``bytes``, ``string``,
        ``json``, ``avro``); ``None`` without an output topic."""

    @abstractmethod
    def get_logger(self) -> logging.Logger:
        """A logger; with a ``log_topic`` its records are published there too."""

    # --- configuration -----------------------------------------------------
    @abstractmethod
    def get_user_config_value(self, key: str) -> Any:
        """One value of the function's ``user_config``, or ``None``."""

    @abstractmethod
    def get_user_config_map(self) -> Mapping[str, Any]:
        """The whole ``user_config``."""

    @abstractmethod
    def get_secret(self, secret_name: str) -> str | None:
        """The secret ``secret_name`` of the function's ``secrets``, as its secrets
        provider resolves the configured value; ``None`` if it is not configured."""

    # --- output ------------------------------------------------------------
    def publish(
        self,
        topic_name: str,
        message: Any,
        serde_class_name: str | None = None,
        properties: Mapping[str, str] | None = None,
        compression_type: Any = None,
        callback: Any = None,
        message_conf: Mapping[str, Any] | None = None,
    ) -> None:
        """Publish ``message`` to any topic, committed with the current message.

        ``serde_class_name`` (``module.Class``, or Pulsar's ``serde.PickleSerDe``)
        encodes the message; by default the topic's own encoding does.
        ``message_conf`` holds ``properties``, ``partition_key``,
        ``event_timestamp`` (ms) and Pulsar's other ``send_async`` keys (see
        :mod:`sparkfn.api.publish`); ``properties``, when given, replaces its
        properties. ``compression_type`` is accepted and not needed.
        ``callback(result, message_id)`` is called with ``Result.Ok`` once
        the message's ``process`` call has returned (its publishes are then
        part of the batch; a failed call discards them and calls no
        callback); the id is ``None``, as offsets are given at commit.
        """
        self._publish(
            read_publish(
                topic_name,
                message,
                serde_class_name,
                properties,
                compression_type,
                callback,
                message_conf,
            )
        )

    @abstractmethod
    def _publish(self, publication: Publication) -> None:
        """Buffer what :meth:`publish` was asked, its arguments already checked."""

    @abstractmethod
    def record_metric(self, metric_name: str, metric_value: float) -> None:
        """Add an observation to a user metric (a summary: count, sum, min, max)."""

    @abstractmethod
    def ack(self, msgid: Any, topic: str) -> None:
        """Acknowledge a message of input ``topic``; a ``ValueError`` if it is not an input.

        sparkfn acknowledges every message with its batch's commit, so this
        checks the topic and does nothing more.
        """

    # --- lifecycle -----------------------------------------------------------
    @abstractmethod
    def fatal(self, exc: BaseException) -> None:
        """Terminate this instance with ``exc`` (PIP-297); callable from any thread.

        Within a few seconds: no new batch starts, a task of this instance
        running in this process fails with the fatal error, the death
        exception (type, message, traceback, thread) is stored and shown by
        status, ``fatal_exceptions_total`` counts it, and it is logged at
        ERROR. Spark task retries do not revive the instance; the function's
        failure policy (``on_fatal``, default ``SHUTDOWN_FUNCTION``) decides
        what follows. Only ``close()`` is called on the object afterwards.
        Called from the task's own thread it raises and does not return.
        """

    # --- state -------------------------------------------------------------
    @abstractmethod
    def incr_counter(self, key: str, amount: int) -> None:
        """Add ``amount`` to the counter ``key``."""

    @abstractmethod
    def get_counter(self, key: str) -> int:
        """The counter ``key`` (0 if never set)."""

    @abstractmethod
    def del_counter(self, key: str) -> None:
        """Delete the counter ``key``."""

    @abstractmethod
    def put_state(self, key: str, value: str | bytes) -> None:
        """Set the state value ``key``."""

    @abstractmethod
    def get_state(self, key: str) -> bytes | None:
        """The state value ``key`` as bytes (Pulsar's is its table's bytes too: a
        ``put_state('k', 'v')`` reads back ``b'v'``), or ``None``."""

    @abstractmethod
    def del_state(self, key: str) -> None:
        """Delete the state value ``key``."""
