"""Topics created on first use, as Pulsar's ``allowAutoTopicCreation`` does.

A function's topics (inputs, output, log topic, dead-letter topic, the
topics ``context.publish`` names) and a ``topics produce`` target are created
when they do not exist, with the store's defaults: one partition, ``bytes``
(Pulsar's ``defaultNumPartitions`` and its schema-less topics). The store
keeps the setting (the ``store_settings`` table), so every process on it
agrees; a worker can turn it off for its own functions too
(``allow_auto_topic_creation``), and a function for itself
(``auto_create_topics: false``). Off, a missing topic is the clear error it
always was.

>>> creation = TopicCreation.read(store)          # enabled, 1 partition, bytes
>>> TopicCreation.write(store, enabled=False)      # `sparkfn topics auto-creation --disable`
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy import insert, select, update

from sparkfn.api.errors import ConfigError, TopicExistsError, TopicNotFoundError
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics.admin import MAX_PARTITIONS, TopicAdmin, TopicInfo, parse_schema_type
from sparkfn.topics.message import SchemaType

_settings = schema.store_settings
_KEYS = {
    "enabled": "allow_auto_topic_creation",
    "partitions": "auto_topic_partitions",
    "schema_type": "auto_topic_schema_type",
}


@dataclass(frozen=True)
class TopicCreation:
    """Whether missing topics are created on first use, and how."""

    enabled: bool = True
    partitions: int = 1
    schema_type: SchemaType = SchemaType.BYTES

    @classmethod
    def read(cls, store: Store) -> TopicCreation:
        """The store's setting (defaults for a key never set)."""
        with store.read() as conn:
            rows = dict(conn.execute(select(_settings.c.key, _settings.c.value)).tuples().all())
        found = cls()
        if _KEYS["enabled"] in rows:
            found = replace(found, enabled=rows[_KEYS["enabled"]] == "true")
        if _KEYS["partitions"] in rows:
            found = replace(found, partitions=int(rows[_KEYS["partitions"]]))
        if _KEYS["schema_type"] in rows:
            found = replace(found, schema_type=SchemaType(rows[_KEYS["schema_type"]]))
        return found

    @classmethod
    def write(
        cls,
        store: Store,
        *,
        enabled: bool | None = None,
        partitions: int | None = None,
        schema_type: str | SchemaType | None = None,
    ) -> TopicCreation:
        """Change the store's setting (what is not given stays); returns the new one."""
        values: dict[str, str] = {}
        if enabled is not None:
            values[_KEYS["enabled"]] = "true" if enabled else "false"
        if partitions is not None:
            if isinstance(partitions, bool) or not 1 <= partitions <= MAX_PARTITIONS:
                msg = (
                    f"auto_topic_partitions must be between 1 and {MAX_PARTITIONS}; "
                    f"got {partitions!r}"
                )
                raise ConfigError(msg)
            values[_KEYS["partitions"]] = str(partitions)
        if schema_type is not None:
            kind = parse_schema_type(schema_type)
            if kind is SchemaType.AVRO:
                msg = "auto_topic_schema_type cannot be avro: an avro topic needs its schema"
                raise ConfigError(msg)
            values[_KEYS["schema_type"]] = kind.value
        now = utc_now()
        with store.write() as conn:
            for key, value in values.items():
                changed = conn.execute(
                    update(_settings)
                    .where(_settings.c.key == key)
                    .values(value=value, updated_at=now)
                ).rowcount
                if not changed:
                    conn.execute(insert(_settings).values(key=key, value=value, updated_at=now))
        return cls.read(store)


def ensure_topic(store: Store, topic: str, creation: TopicCreation) -> TopicInfo:
    """``topic``'s info, creating it first (with ``creation``'s defaults) when it
    does not exist and ``creation.enabled``; else :class:`TopicNotFoundError`.

    Another process may create it at the same moment: that is the topic then.
    """
    admin = TopicAdmin(store)
    try:
        return admin.get(topic)
    except TopicNotFoundError:
        if not creation.enabled:
            raise
    try:
        return admin.create(topic, partitions=creation.partitions, schema_type=creation.schema_type)
    except TopicExistsError:
        return admin.get(topic)
