"""The harness's topics: in memory, typed by the schemas it was given.

The topics that exist are the ones the function's config or the harness
names (inputs, output, log and dead-letter topics, ``topic_schemas``), as
the ones a real run checks before it starts; any other is created on first
use only if ``auto_create_topics`` says so (``bytes``, as on Spark), so a
publish to a missing topic fails the message as it does on Spark.
:class:`HarnessTopics` answers the instance's questions about a topic's
schema (it is the instance's topic catalog) and decodes what the function
produced, as a consumer of that topic would. Each message produced is kept as a :class:`ProducedMessage`,
and :class:`TopicMessages` shows the decoded values per topic under any
spelling of the topic's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sparkfn.api.errors import TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.function.loader import Serde
from sparkfn.runtime.function.topics import AUTO_CREATED_SCHEMA
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
    """The topics of a harness's function: ``input_schema`` for every input (and the
    topics ``topics_pattern`` matches), ``output_schema`` for the output, log and
    dead-letter topics, ``topic_schemas`` for any other topic by name; no other exists."""

    def __init__(
        self,
        config: FunctionConfig,
        input_schema: Any,
        output_schema: Any,
        topic_schemas: Mapping[str, Any] | None,
    ) -> None:
        self._config = config
        self._input_schema = parse_topic_schema(input_schema)
        self._schemas = dict.fromkeys(config.inputs, self._input_schema)
        for topic in (config.output, config.log_topic, config.dead_letter_target):
            if topic is not None:
                self._schemas[topic] = parse_topic_schema(output_schema)
        for topic, schema in (topic_schemas or {}).items():
            self._schemas[topic_name(topic)] = parse_topic_schema(schema)
        self._decoders: dict[str, Serde] = {}

    def schema(self, topic: str) -> tuple[SchemaType, str | None]:
        """The topic's schema type and definition (Avro's schema, else ``None``);
        :class:`TopicNotFoundError` for a topic that does not exist."""
        found = self._schemas.get(topic)
        if found is not None:
            return found
        pattern = self._config.topics_pattern
        if pattern and re.fullmatch(pattern, topic):
            return self._input_schema
        msg = f"topic {topic} does not exist"
        raise TopicNotFoundError(msg)

    def schema_of(self, topic: str) -> SchemaType:
        """The topic's schema type."""
        return self.schema(topic)[0]

    def create(self, topic: str) -> SchemaType:
        """Create ``topic`` (``bytes``, as on Spark) unless it exists; its schema type."""
        return self._schemas.setdefault(topic, (AUTO_CREATED_SCHEMA, None))[0]

    def definition_of(self, topic: str) -> str | None:
        """The topic's schema definition, if it has one."""
        return self.schema(topic)[1]

    def partitions_of(self, topic: str) -> int:
        """The harness's topics have one partition each."""
        self.schema(topic)
        return 1

    def decoder(self, topic: str) -> Serde:
        """What decodes the topic's values, as its consumers read them."""
        serde = self._decoders.get(topic)
        if serde is None:
            name = self._config.output_serde if topic == self._config.output else "auto"
            kind, definition = self.schema(topic)
            serde = Serde(name, kind, topic, self._config.fqfn, definition=definition)
            self._decoders[topic] = serde
        return serde
