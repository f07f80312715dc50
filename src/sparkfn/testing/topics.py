"""The harness's topics: in memory, typed by the schemas it was given.

Every topic exists and none is created: :class:`HarnessTopics` answers the
instance's questions about a topic's schema (it is the instance's topic
catalog) and decodes what the function produced, as a consumer of that
topic would. Each message produced is kept as a :class:`ProducedMessage`,
and :class:`TopicMessages` shows the decoded values per topic under any
spelling of the topic's name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.loader import Serde
from sparkfn.topics.admin import parse_topic_schema
from sparkfn.topics.message import SchemaType


def topic_name(name: str) -> str:
    """``tenant/namespace/topic`` for any spelling of a topic's name."""
    return str(TopicName.parse(name))


@dataclass(frozen=True)
class ProducedMessage:
    """A message the function produced and the harness committed, value decoded."""

    kind: str  # "output", "publish", "dead_letter" or "log"
    topic: str  # tenant/namespace/topic
    value: Any
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: datetime | None = None


class TopicMessages(Mapping[str, list[Any]]):
    """Decoded values per topic; look topics up by any spelling of their name.

    >>> published = TopicMessages({"public/default/fruits": ["apple"]})
    >>> published["fruits"] == published["persistent://public/default/fruits"] == ["apple"]
    True
    """

    def __init__(self, values: dict[str, list[Any]]) -> None:
        self._values = values

    def __getitem__(self, topic: str) -> list[Any]:
        return self._values[topic_name(topic)]

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and topic_name(topic) in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"TopicMessages({self._values!r})"


class HarnessTopics:
    """The topics of a harness's function: ``input_schema`` for every input,
    ``output_schema`` for the output and for topics named nowhere,
    ``topic_schemas`` for any other topic by name."""

    def __init__(
        self,
        config: FunctionConfig,
        input_schema: Any,
        output_schema: Any,
        topic_schemas: Mapping[str, Any] | None,
    ) -> None:
        self._config = config
        self._schemas = {topic: parse_topic_schema(input_schema) for topic in config.inputs}
        if config.output is not None:
            self._schemas[config.output] = parse_topic_schema(output_schema)
        for topic, schema in (topic_schemas or {}).items():
            self._schemas[topic_name(topic)] = parse_topic_schema(schema)
        self._default_schema = parse_topic_schema(output_schema)
        self._decoders: dict[str, Serde] = {}

    def schema(self, topic: str) -> tuple[SchemaType, str | None]:
        """The topic's schema type and definition (Avro's schema, else ``None``)."""
        return self._schemas.get(topic, self._default_schema)

    def schema_of(self, topic: str) -> SchemaType:
        """The topic's schema type."""
        return self.schema(topic)[0]

    def create(self, topic: str) -> SchemaType:
        """Every topic exists: the topic's schema type."""
        return self.schema(topic)[0]

    def definition_of(self, topic: str) -> str | None:
        """The topic's schema definition, if it has one."""
        return self.schema(topic)[1]

    def decoder(self, topic: str) -> Serde:
        """What decodes the topic's values, as its consumers read them."""
        serde = self._decoders.get(topic)
        if serde is None:
            name = self._config.output_serde if topic == self._config.output else "auto"
            kind, definition = self.schema(topic)
            serde = Serde(name, kind, topic, self._config.fqfn, definition=definition)
            self._decoders[topic] = serde
        return serde
