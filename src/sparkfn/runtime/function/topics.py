"""The topics a function instance writes to, as the instance sees them.

The instance asks a :class:`TopicCatalog` for a topic's schema type (and an
``avro`` topic's schema definition) before it encodes a value for it
(outputs, ``context.publish``) or decodes one from it (inputs). On Spark the catalog
is the store's (:class:`StoreTopicCatalog`); the unit-test harness has its own
in-memory one, where every topic exists.
"""

from __future__ import annotations

from typing import Protocol

from sparkfn.api.errors import TopicNotFoundError
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.autocreate import TopicCreation, ensure_topic
from sparkfn.topics.message import SchemaType

AUTO_CREATED_SCHEMA = SchemaType.BYTES


class TopicCatalog(Protocol):
    """The topics an instance may write to."""

    def schema_of(self, topic: str) -> SchemaType:
        """``topic``'s schema type; raises :class:`~sparkfn.api.errors.TopicNotFoundError`."""
        ...

    def create(self, topic: str) -> SchemaType:
        """Create ``topic`` (the store's defaults: 1 partition, ``bytes``) unless it exists;
        its schema type."""
        ...

    def definition_of(self, topic: str) -> str | None:
        """An ``avro`` topic's schema definition (Avro JSON); ``None`` for other types."""
        ...

    def partitions_of(self, topic: str) -> int:
        """How many partitions ``topic`` has; raises :class:`~sparkfn.api.errors.TopicNotFoundError`."""
        ...


class PartitionCounts:
    """Which input topics are partitioned (more than one partition), for Pulsar's
    ``-partition-N`` names (:data:`~sparkfn.runtime.function.rows.Partitioned`).

    A topic's count is read once; a partition past 0 says so by itself, so a
    topic that grew is named right from its new partitions on.
    """

    def __init__(self, topics: TopicCatalog) -> None:
        self._topics = topics
        self._counts: dict[str, int] = {}

    def __call__(self, topic: str, partition: int) -> bool:
        if partition > 0:
            return True
        count = self._counts.get(topic)
        if count is None:
            try:
                count = self._topics.partitions_of(topic)
            except TopicNotFoundError:
                count = 1  # deleted under the batch: named as a one-partition topic
            self._counts[topic] = count
        return count > 1


class StoreTopicCatalog:
    """The topics of a store; schema types are cached, for the life of the instance."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._admin = TopicAdmin(store)
        self._topics: dict[str, TopicInfo] = {}

    def _info(self, topic: str) -> TopicInfo:
        info = self._topics.get(topic)
        if info is None:
            info = self._topics[topic] = self._admin.get(topic)
        return info

    def schema_of(self, topic: str) -> SchemaType:
        """``topic``'s schema type; raises :class:`~sparkfn.api.errors.TopicNotFoundError`."""
        return self._info(topic).schema_type

    def definition_of(self, topic: str) -> str | None:
        """An ``avro`` topic's schema definition."""
        return self._info(topic).schema_definition

    def partitions_of(self, topic: str) -> int:
        """How many partitions ``topic`` had when first asked about."""
        return self._info(topic).partitions

    def create(self, topic: str) -> SchemaType:
        """Create ``topic`` unless it exists (another task may create it at the same
        time), with the store's defaults; :class:`TopicNotFoundError` when the store
        creates no topic on first use."""
        self._topics[topic] = ensure_topic(self._store, topic, TopicCreation.read(self._store))
        return self.schema_of(topic)
