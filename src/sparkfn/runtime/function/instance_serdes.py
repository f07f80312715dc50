"""The serdes of one function instance's topics, made once per topic and kept.

Outputs are encoded by the function's ``output_serde`` on its output topic
and by the topic's schema elsewhere (``context.publish``); inputs are
decoded by ``input_serde`` or the per-topic one of ``input_serdes``; a
publish naming a serde class gets that one.
"""

from __future__ import annotations

from typing import Any

from sparkfn.api.errors import TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.serde import Serde
from sparkfn.runtime.function.topics import TopicCatalog
from sparkfn.topics.message import SchemaType, check_values


class InstanceSerdes:
    """The serdes one instance encodes and decodes with, by topic."""

    def __init__(self, config: FunctionConfig, topics: TopicCatalog, *, pulsar: bool) -> None:
        self.config = config
        self.pulsar = pulsar  # Pulsar's serde rules (sparkfn.runtime.function.pulsar_mode)
        self._topics = topics
        self._outputs: dict[str, Serde] = {}
        self._inputs: dict[str, Serde] = {}
        self._named: dict[tuple[str, str], Serde] = {}  # publish's, by (class name, topic)

    def topic_schema(self, topic: str) -> SchemaType:
        """The schema type of ``topic``, which the instance writes to.

        A topic that does not exist is created here when the function's
        ``auto_create_topics`` allows it; otherwise it is a
        :class:`TopicNotFoundError` naming the function and the topic.
        """
        try:
            return self._topics.schema_of(topic)
        except TopicNotFoundError:
            if self.config.auto_create_topics:
                try:
                    return self._topics.create(topic)
                except TopicNotFoundError:
                    pass  # the store creates none on first use
        msg = (
            f"function {self.config.fqfn}: publish to topic {topic}, which does not "
            "exist; create it first (topics are not created on first use here)"
        )
        raise TopicNotFoundError(msg) from None

    def output_for(self, topic: str) -> Serde:
        """The serde encoding values for ``topic``."""
        serde = self._outputs.get(topic)
        if serde is None:
            name = self.config.output_serde if topic == self.config.output else "auto"
            serde = self._outputs[topic] = self._serde(name, self.topic_schema(topic), topic)
        return serde

    def input_for(self, topic: str) -> Serde:
        """The serde decoding values from input ``topic``."""
        serde = self._inputs.get(topic)
        if serde is None:
            schema = self._topics.schema_of(topic)
            name = self.config.input_serde_of(topic)
            serde = self._inputs[topic] = self._serde(name, schema, topic)
        return serde

    def _serde(self, name: str, schema: SchemaType, topic: str) -> Serde:
        definition = self._topics.definition_of(topic) if schema is SchemaType.AVRO else None
        return Serde(
            name,
            schema,
            topic,
            self.config.fqfn,
            definition=definition,
            pulsar_compat=self.pulsar,
        )

    def encode_with(self, serde_class_name: str, topic: str, value: Any) -> bytes:
        """``value`` encoded for ``topic`` by the serde (or Record class) that
        ``serde_class_name`` names (``context.publish``); the bytes must suit the topic."""
        key = (serde_class_name, topic)
        serde = self._named.get(key)
        if serde is None:
            schema = self.topic_schema(topic)
            serde = self._named[key] = self._serde(serde_class_name, schema, topic)
        data = serde.encode(value)
        if serde.custom is not None:
            check_values([data], serde.schema_type, topic=topic, definition=serde.definition)
        return data
