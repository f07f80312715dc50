"""Topic metadata: create, list, describe, delete, and look up."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from sparkfn.api.errors import ConfigError, TopicExistsError, TopicNotFoundError
from sparkfn.api.schemas import AvroSchema, Schema
from sparkfn.config.names import TopicName
from sparkfn.store import schema, signals
from sparkfn.store.store import Store
from sparkfn.topics.garbage import retire_locations
from sparkfn.topics.message import SchemaType

MAX_PARTITIONS = 1024
# How Pulsar names one partition of a partitioned topic: <topic>-partition-<n>.
PARTITION_SUFFIX = "-partition-"


@dataclass(frozen=True)
class TopicInfo:
    """A topic's metadata row."""

    id: int
    name: TopicName
    partitions: int
    schema_type: SchemaType
    retention_ms: int | None
    retention_bytes: int | None
    created_at: datetime
    # An ``avro`` topic's schema (Avro JSON text); None for the other types.
    schema_definition: str | None = None

    @property
    def key(self) -> str:
        """Path-safe form of the name, used for segment directories."""
        return f"{self.name.tenant}/{self.name.namespace}/{self.name.name}"


@dataclass(frozen=True)
class PartitionStats:
    """What one partition holds now."""

    partition: int
    start_offset: int
    end_offset: int
    segments: int
    size_bytes: int

    @property
    def messages(self) -> int:
        """Messages retained (end minus start)."""
        return self.end_offset - self.start_offset


def parse_schema_type(value: str | SchemaType) -> SchemaType:
    """Validate a schema type name; the error lists the allowed ones."""
    try:
        return SchemaType(value)
    except ValueError:
        allowed = ", ".join(t.value for t in SchemaType)
        msg = f"schema_type {value!r} is not one of: {allowed}"
        raise ConfigError(msg) from None


def parse_topic_schema(value: Any) -> tuple[SchemaType, str | None]:
    """A topic's schema type and definition from a type name (``"json"``) or a
    ``pulsar.schema`` schema object (``AvroSchema(Record)`` is ``avro`` with its schema)."""
    if isinstance(value, Schema):
        info = value.schema_info()
        kind = parse_schema_type(info.schema_type().lower())
        return kind, info.schema() if kind is SchemaType.AVRO else None
    return parse_schema_type(value), None


def _retention_ms(
    name: TopicName, retention: timedelta | None, retention_bytes: int | None
) -> int | None:
    """Validate retention limits (``None`` keeps forever); returns the time limit in ms."""
    retention_ms = None
    if retention is not None:
        retention_ms = int(retention.total_seconds() * 1000)
        if retention_ms <= 0:
            msg = f"retention for topic {name} must be positive; got {retention}"
            raise ConfigError(msg)
    if retention_bytes is not None and retention_bytes <= 0:
        msg = f"retention_bytes for topic {name} must be positive; got {retention_bytes}"
        raise ConfigError(msg)
    return retention_ms


def _definition_text(name: TopicName, kind: SchemaType, definition: Any) -> str | None:
    """An ``avro`` topic's schema as canonical JSON text; ConfigError if missing or invalid."""
    if kind is not SchemaType.AVRO:
        if definition is not None:
            msg = f"topic {name}: only avro topics carry a schema definition (schema {kind.value})"
            raise ConfigError(msg)
        return None
    if definition is None:
        msg = f"topic {name}: an avro topic needs a schema definition (an Avro record schema)"
        raise ConfigError(msg)
    try:
        schema = AvroSchema(None, definition)
    except (ValueError, TypeError) as exc:
        msg = f"topic {name}: schema definition: {exc}"
        raise ConfigError(msg) from None
    return json.dumps(json.loads(schema.schema_info().schema()), separators=(",", ":"))


def _row_to_info(row: object) -> TopicInfo:
    return TopicInfo(
        id=row.id,  # type: ignore[attr-defined]
        name=TopicName(row.tenant, row.namespace, row.name),  # type: ignore[attr-defined]
        partitions=row.partitions,  # type: ignore[attr-defined]
        schema_type=SchemaType(row.schema_type),  # type: ignore[attr-defined]
        retention_ms=row.retention_ms,  # type: ignore[attr-defined]
        retention_bytes=row.retention_bytes,  # type: ignore[attr-defined]
        created_at=row.created_at,  # type: ignore[attr-defined]
    )


def _with_definition(conn: Connection, info: TopicInfo) -> TopicInfo:
    """``info`` with its schema definition, read only for ``avro`` topics (the others have none)."""
    if info.schema_type is not SchemaType.AVRO:
        return info
    definition = conn.execute(
        select(schema.topic_schemas.c.definition).where(schema.topic_schemas.c.topic_id == info.id)
    ).scalar_one_or_none()
    return replace(info, schema_definition=definition)


class TopicAdmin:
    """Create, inspect and delete topics in a store.

    >>> admin = TopicAdmin(store)
    >>> admin.create("orders", partitions=4, schema_type="json")
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(
        self,
        topic: str | TopicName,
        *,
        partitions: int = 1,
        schema_type: str | SchemaType = SchemaType.BYTES,
        retention: timedelta | None = None,
        retention_bytes: int | None = None,
        schema_definition: Any = None,
    ) -> TopicInfo:
        """Create a topic; raises :class:`TopicExistsError` if it exists.

        An ``avro`` topic needs ``schema_definition``: an Avro record schema
        (a dict or its JSON text), such as a ``pulsar.schema`` record's ``schema()``.
        """
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int):
            msg = f"partitions for topic {name} must be an integer; got {partitions!r}"
            raise ConfigError(msg)
        if not 1 <= partitions <= MAX_PARTITIONS:
            msg = (
                f"partitions for topic {name} must be between 1 and {MAX_PARTITIONS}; "
                f"got {partitions}"
            )
            raise ConfigError(msg)
        kind = parse_schema_type(schema_type)
        definition = _definition_text(name, kind, schema_definition)
        retention_ms = _retention_ms(name, retention, retention_bytes)
        try:
            with self.store.write() as conn:
                signals.hint_on_commit(conn, signals.TOPICS_HINT)  # for topics_pattern readers
                topic_id = conn.execute(
                    insert(schema.topics)
                    .values(
                        tenant=name.tenant,
                        namespace=name.namespace,
                        name=name.name,
                        partitions=partitions,
                        schema_type=kind.value,
                        retention_ms=retention_ms,
                        retention_bytes=retention_bytes,
                        created_at=datetime.now(UTC),
                    )
                    .returning(schema.topics.c.id)
                ).scalar_one()
                conn.execute(
                    insert(schema.partitions),
                    [
                        {"topic_id": topic_id, "partition": p, "next_offset": 0, "start_offset": 0}
                        for p in range(partitions)
                    ],
                )
                if definition is not None:
                    conn.execute(
                        insert(schema.topic_schemas).values(
                            topic_id=topic_id, definition=definition
                        )
                    )
        except IntegrityError as exc:
            msg = f"topic {name} already exists"
            raise TopicExistsError(msg) from exc
        return self.get(name)

    def get(self, topic: str | TopicName, conn: Connection | None = None) -> TopicInfo:
        """The topic's metadata; raises :class:`TopicNotFoundError`."""
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        query = select(schema.topics).where(
            and_(
                schema.topics.c.tenant == name.tenant,
                schema.topics.c.namespace == name.namespace,
                schema.topics.c.name == name.name,
            )
        )
        if conn is None:
            with self.store.read() as own:
                row = own.execute(query).first()
                info = None if row is None else _with_definition(own, _row_to_info(row))
        else:
            row = conn.execute(query).first()
            info = None if row is None else _with_definition(conn, _row_to_info(row))
        if info is None:
            msg = f"topic {name} does not exist"
            raise TopicNotFoundError(msg)
        return info

    def get_many(
        self, topics: Iterable[str | TopicName], conn: Connection
    ) -> dict[TopicName, TopicInfo]:
        """The metadata of those of ``topics`` that exist, in one query (a query group's reader)."""
        names = {t if isinstance(t, TopicName) else TopicName.parse(t) for t in topics}
        if not names:
            return {}
        rows = conn.execute(
            select(schema.topics).where(schema.topics.c.name.in_({n.name for n in names}))
        ).all()
        infos = (_row_to_info(r) for r in rows)
        return {i.name: _with_definition(conn, i) for i in infos if i.name in names}

    def partition_by_name(self, topic: str | TopicName) -> tuple[TopicInfo, int] | None:
        """Pulsar's name of one partition, ``<topic>-partition-<n>``: the partitioned topic
        and ``n``, when ``topic`` itself does not exist and that topic has partition ``n``;
        else ``None``. A partition it does not have is a :class:`ConfigError` naming both."""
        name = str(TopicName.parse(str(topic)))
        base, sep, number = name.rpartition(PARTITION_SUFFIX)
        if not sep or not number.isdigit() or self.exists(name) or not self.exists(base):
            return None
        info = self.get(base)
        if int(number) >= info.partitions:
            msg = (
                f"topic {name}: {base} has {info.partitions} partition(s), "
                f"0 to {info.partitions - 1}; there is no partition {number}"
            )
            raise ConfigError(msg)
        return info, int(number)

    def exists(self, topic: str | TopicName) -> bool:
        """Whether the topic exists."""
        try:
            self.get(topic)
        except TopicNotFoundError:
            return False
        return True

    def list(self, tenant: str | None = None, namespace: str | None = None) -> list[TopicInfo]:
        """All topics, optionally only those of one tenant/namespace, sorted by name."""
        query = select(schema.topics)
        if tenant is not None:
            query = query.where(schema.topics.c.tenant == tenant)
        if namespace is not None:
            query = query.where(schema.topics.c.namespace == namespace)
        with self.store.read() as conn:
            rows = conn.execute(query).all()
            infos = [_with_definition(conn, _row_to_info(r)) for r in rows]
        return sorted(infos, key=lambda t: t.name)

    def stats(self, topic: str | TopicName) -> builtins.list[PartitionStats]:
        """Per-partition start/end offsets, segment count and bytes."""
        info = self.get(topic)
        seg = schema.segments
        with self.store.read() as conn:
            parts = conn.execute(
                select(schema.partitions)
                .where(schema.partitions.c.topic_id == info.id)
                .order_by(schema.partitions.c.partition)
            ).all()
            sizes = {
                r.partition: (r.n, r.size or 0)
                for r in conn.execute(
                    select(
                        seg.c.partition,
                        func.count().label("n"),
                        func.sum(seg.c.size_bytes).label("size"),
                    )
                    .where(seg.c.topic_id == info.id)
                    .group_by(seg.c.partition)
                )
            }
        return [
            PartitionStats(
                partition=p.partition,
                start_offset=p.start_offset,
                end_offset=p.next_offset,
                segments=sizes.get(p.partition, (0, 0))[0],
                size_bytes=int(sizes.get(p.partition, (0, 0))[1]),
            )
            for p in parts
        ]

    def subscriptions(self, topic: str | TopicName) -> dict[str, dict[int, int]]:
        """Each subscription of the topic (by name, sorted): its cursor, the next offset
        it reads, per partition."""
        info = self.get(topic)
        table = schema.subscriptions
        found: dict[str, dict[int, int]] = {}
        with self.store.read() as conn:
            for row in conn.execute(
                select(table.c.name, table.c.partition, table.c.cursor)
                .where(table.c.topic_id == info.id)
                .order_by(table.c.name, table.c.partition)
            ):
                found.setdefault(row.name, {})[row.partition] = row.cursor
        return found

    def set_retention(
        self, topic: str | TopicName, *, retention: timedelta | None, retention_bytes: int | None
    ) -> TopicInfo:
        """Change a topic's retention (``None`` keeps forever)."""
        info = self.get(topic)
        retention_ms = _retention_ms(info.name, retention, retention_bytes)
        with self.store.write() as conn:
            conn.execute(
                update(schema.topics)
                .where(schema.topics.c.id == info.id)
                .values(retention_ms=retention_ms, retention_bytes=retention_bytes)
            )
        return self.get(topic)

    def delete(self, topic: str | TopicName) -> None:
        """Delete a topic, its index and subscriptions; its files become garbage."""
        info = self.get(topic)
        with self.store.write() as conn:
            locations = [
                r.location
                for r in conn.execute(
                    select(schema.segments.c.location).where(
                        and_(
                            schema.segments.c.topic_id == info.id,
                            schema.segments.c.location.is_not(None),
                        )
                    )
                )
            ]
            if info.schema_type is SchemaType.AVRO:
                conn.execute(
                    delete(schema.topic_schemas).where(schema.topic_schemas.c.topic_id == info.id)
                )
            for table in (
                schema.segments,
                schema.subscriptions,
                schema.producer_sequences,
                schema.partitions,
            ):
                conn.execute(delete(table).where(table.c.topic_id == info.id))
            conn.execute(delete(schema.topics).where(schema.topics.c.id == info.id))
            retire_locations(conn, locations)
