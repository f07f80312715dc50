"""The topic routes of the worker's REST API, on Pulsar's v2 admin paths.

Under ``/admin/v2/persistent``; bodies are :mod:`sparkfn.worker.api.topic_models`:

==========  ===================================================================  ==========================
verb        path (under ``/admin/v2/persistent``)                                what
==========  ===================================================================  ==========================
GET         ``/{tenant}/{namespace}``                                            topics of the namespace
PUT         ``/{tenant}/{namespace}/{topic}``                                    create, 1 partition
PUT         ``/{tenant}/{namespace}/{topic}/partitions``                         create, N partitions
GET         ``/{tenant}/{namespace}/{topic}/partitions``                         ``{"partitions": N}``
DELETE      ``/{tenant}/{namespace}/{topic}[/partitions]``                       delete, messages too
GET         ``/{tenant}/{namespace}/{topic}/stats``                              ``TopicStats``
GET         ``/{tenant}/{namespace}/{topic}/partitioned-stats``                  and each partition's
GET         ``/{tenant}/{namespace}/{topic}/subscriptions``                      subscription names
GET         ``/{tenant}/{namespace}/{topic}/subscription/{sub}/position/{n}``    peek: n-th after a cursor
POST        ``/{tenant}/{namespace}/{topic}/subscription/{sub}/resetcursor/{ms}``  cursors to a time
POST        ``/{tenant}/{namespace}/{topic}/subscription/{sub}/resetcursor``       to a message id
DELETE      ``/{tenant}/{namespace}/{topic}/subscription/{sub}``                 unsubscribe (``?force``)
GET         ``/{tenant}/{namespace}/{topic}/examinemessage``                     n-th from either end
==========  ===================================================================  ==========================

sparkfn has no non-partitioned topics: a topic created without
``/partitions`` has one partition, and ``/partitions`` reports its count.
Producing is :mod:`sparkfn.worker.api.produce_api` (Pulsar's REST producer path).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import Response
from pydantic import Field

from sparkfn.api.errors import ConfigError, NotFoundError, SubscriptionNotFoundError
from sparkfn.config.names import TopicName
from sparkfn.runtime.lifecycle.control import live_state
from sparkfn.store.store import Store
from sparkfn.topics.admin import PartitionStats, TopicAdmin, TopicInfo
from sparkfn.topics.message import ReceivedMessage, messages_from_table
from sparkfn.topics.reading import read_range
from sparkfn.topics.subscription import unsubscribe
from sparkfn.topics.subscription.reset import offsets_at, offsets_of_id, reset_cursors
from sparkfn.worker.api.params import MAX_INT32, Namespace, Tenant, Topic
from sparkfn.worker.api.topic_models import (
    MAX_NAME_LENGTH,
    PartitionedTopicMetadata,
    PartitionedTopicSettings,
    PartitionedTopicStats,
    ResetCursorData,
    TopicMessage,
    TopicSettings,
    TopicStats,
    persistent,
)
from sparkfn.worker.http import ErrorBody
from sparkfn.worker.service import Worker

TOPIC = "/{tenant}/{namespace}/{topic}"
# How far a peek may reach: each position up to it is a message read past.
MAX_POSITION = 1_000_000
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the last time Python's datetime holds

Position = Annotated[int, Path(ge=1, le=MAX_POSITION, description="1 is the first message.")]
Subscription = Annotated[str, Path(min_length=1, max_length=MAX_NAME_LENGTH)]


def topic_name(tenant: str, namespace: str, topic: str) -> TopicName:
    """The topic a route's path names; :class:`ConfigError` (400) for a malformed part."""
    return TopicName.parse(f"{tenant}/{namespace}/{topic}", field="topic")


def check_namespace(tenant: str, namespace: str) -> None:
    """:class:`ConfigError` (400) unless both are valid names."""
    topic_name(tenant, namespace, "topic")


def topics_router(worker: Worker) -> APIRouter:
    """The ``/admin/v2/persistent`` routes over the topics of the worker's store."""
    router = APIRouter(tags=["topics"])
    store = worker.open_store()
    admin = TopicAdmin(store)

    def create(name: TopicName, settings: TopicSettings, partitions: int) -> Response:
        retention = settings.retention_ms
        admin.create(
            name,
            partitions=partitions,
            schema_type=settings.schema_type,
            retention=None if retention is None else timedelta(milliseconds=retention),
            retention_bytes=settings.retention_bytes,
            schema_definition=settings.avro_schema,
        )
        return Response(status_code=204)

    @router.get("/{tenant}/{namespace}", response_model=list[str])
    def list_topics(tenant: Tenant, namespace: Namespace) -> list[str]:
        """The topics of ``tenant/namespace``, as ``persistent://`` names, sorted."""
        check_namespace(tenant, namespace)
        return [persistent(info) for info in admin.list(tenant=tenant, namespace=namespace)]

    @router.put(TOPIC, status_code=204, response_class=Response)
    def create_topic(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        settings: Annotated[TopicSettings | None, Body()] = None,
    ) -> Response:
        """Create a topic with one partition (a body sets its schema and retention)."""
        return create(topic_name(tenant, namespace, topic), settings or TopicSettings(), 1)

    @router.put(TOPIC + "/partitions", status_code=204, response_class=Response)
    def create_partitioned_topic(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        settings: Annotated[
            PartitionedTopicSettings | Annotated[int, Field(le=MAX_INT32)],
            Body(description="The number of partitions (Pulsar's body), or settings with it."),
        ],
    ) -> Response:
        """Create a topic with N partitions."""
        name = topic_name(tenant, namespace, topic)
        if isinstance(settings, int):
            return create(name, TopicSettings(), settings)
        return create(name, settings, settings.partitions)

    @router.get(TOPIC + "/partitions", response_model=PartitionedTopicMetadata)
    def partitions(tenant: Tenant, namespace: Namespace, topic: Topic) -> PartitionedTopicMetadata:
        """How many partitions the topic has."""
        info = admin.get(topic_name(tenant, namespace, topic))
        return PartitionedTopicMetadata(partitions=info.partitions)

    def delete(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        """Delete the topic with its messages and subscriptions."""
        admin.delete(topic_name(tenant, namespace, topic))
        return Response(status_code=204)

    for path in (TOPIC, TOPIC + "/partitions"):
        router.add_api_route(
            path, delete, methods=["DELETE"], status_code=204, response_class=Response
        )

    @router.get(TOPIC + "/stats", response_model=TopicStats)
    def stats(tenant: Tenant, namespace: Namespace, topic: Topic) -> TopicStats:
        """The topic's settings, message counts, size and subscriptions' backlogs."""
        info = admin.get(topic_name(tenant, namespace, topic))
        return TopicStats.of(info, admin.stats(info.name), admin.subscriptions(info.name))

    @router.get(TOPIC + "/partitioned-stats", response_model=PartitionedTopicStats)
    def partitioned_stats(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        per_partition: Annotated[bool, Query(alias="perPartition")] = True,
    ) -> PartitionedTopicStats:
        """:func:`stats`, and the same for each partition (none with ``perPartition=false``,
        as Pulsar's)."""
        info = admin.get(topic_name(tenant, namespace, topic))
        found = PartitionedTopicStats.of_partitions(
            info, admin.stats(info.name), admin.subscriptions(info.name)
        )
        return found if per_partition else found.model_copy(update={"partition_stats": {}})

    @router.get(TOPIC + "/subscriptions", response_model=list[str])
    def subscriptions(tenant: Tenant, namespace: Namespace, topic: Topic) -> list[str]:
        """The names of the topic's subscriptions (a function's is its subscription name)."""
        return list(admin.subscriptions(topic_name(tenant, namespace, topic)))

    # ``:path``: a function's subscription is named tenant/namespace/name by default.
    @router.get(
        TOPIC + "/subscription/{subscription:path}/position/{position}",
        response_model=TopicMessage,
    )
    def peek(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        position: Position,
    ) -> TopicMessage:
        """The ``position``-th message after the subscription's cursor, without moving it.

        Messages count partition by partition, each in offset order.
        """
        info = admin.get(topic_name(tenant, namespace, topic))
        cursors = admin.subscriptions(info.name).get(subscription)
        if cursors is None:
            msg = f"topic {info.name} has no subscription {subscription!r}"
            raise SubscriptionNotFoundError(msg)
        left = position
        for part in admin.stats(info.name):
            first = max(cursors.get(part.partition, part.start_offset), part.start_offset)
            if left <= part.end_offset - first:
                return TopicMessage.of(_read_one(store, info, part, first + left - 1), info)
            left -= max(0, part.end_offset - first)
        msg = (
            f"topic {info.name} has {position - left} message(s) after subscription "
            f"{subscription!r}'s position; there is no message {position}"
        )
        raise NotFoundError(msg)

    busy: dict[int | str, dict[str, Any]] = {
        412: {"model": ErrorBody, "description": "A live run owns it."}
    }

    @router.post(
        TOPIC + "/subscription/{subscription:path}/resetcursor/{timestamp}",
        status_code=204,
        response_class=Response,
        responses=busy,
    )
    def reset_to_time(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        timestamp: Annotated[int, Path(ge=0, le=MAX_MS, description="ms since the epoch")],
    ) -> Response:
        """Move the subscription's cursors to each partition's first message published
        at or after ``timestamp`` (Pulsar's reset-cursor ``-t``). Refused (412
        ``subscription_busy``) while a running function or sink reads it."""
        info = admin.get(topic_name(tenant, namespace, topic))
        when = datetime.fromtimestamp(timestamp / 1000, UTC)
        return _reset(info, subscription, offsets_at(store, info, when))

    @router.post(
        TOPIC + "/subscription/{subscription:path}/resetcursor",
        status_code=204,
        response_class=Response,
        responses=busy,
    )
    def reset_to_message(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        position: Annotated[ResetCursorData, Body()],
    ) -> Response:
        """Move the cursor of partition ``partitionIndex`` (-1: the only one) so that
        message ``entryId`` (its offset) comes next; ``isExcluded``: the one after it."""
        info = admin.get(topic_name(tenant, namespace, topic))
        partition = position.partition_index
        if partition < 0:
            if info.partitions > 1:
                msg = f"topic {info.name} has {info.partitions} partitions; give partitionIndex"
                raise ConfigError(msg)
            partition = 0
        wanted = offsets_of_id(
            store, info, f"{partition}:{position.entry_id}", position.is_excluded
        )
        return _reset(info, subscription, wanted)

    def _reset(info: TopicInfo, subscription: str, offsets: dict[int, int]) -> Response:
        with store.write() as conn:
            reset_cursors(conn, subscription, info, offsets, live_run=live_state)
        return Response(status_code=204)

    # ``:path``: a function's subscription is named tenant/namespace/name by default.
    @router.delete(
        TOPIC + "/subscription/{subscription:path}",
        status_code=204,
        response_class=Response,
        responses={412: {"model": ErrorBody, "description": "A live run owns it."}},
    )
    def unsubscribe_topic(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        force: Annotated[
            bool, Query(description="Delete it even while a running function or sink reads it.")
        ] = False,
    ) -> Response:
        """Delete the subscription's cursors on this topic (Pulsar's unsubscribe).

        Its cursors on other topics stay; with none left, it is gone. Refused
        (412 ``subscription_busy``) while a running function or sink owns it,
        unless ``force``.
        """
        info = admin.get(topic_name(tenant, namespace, topic))
        with store.write() as conn:
            unsubscribe(conn, subscription, info, live_run=live_state, force=force)
        return Response(status_code=204)

    @router.get(TOPIC + "/examinemessage", response_model=TopicMessage)
    def examine(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        initial_position: Annotated[
            Literal["earliest", "latest"], Query(alias="initialPosition")
        ] = "latest",
        message_position: Annotated[int, Query(alias="messagePosition", ge=1, le=MAX_POSITION)] = 1,
        partition: Annotated[int | None, Query(ge=0, le=MAX_INT32)] = None,
    ) -> TopicMessage:
        """The ``messagePosition``-th message from the start (``earliest``) or the end
        (``latest``) of a partition; ``partition`` may be left out on a 1-partition topic."""
        info = admin.get(topic_name(tenant, namespace, topic))
        if partition is None:
            if info.partitions > 1:
                msg = (
                    f"topic {info.name} has {info.partitions} partitions; examine one of "
                    f"them with partition=0..{info.partitions - 1}"
                )
                raise ConfigError(msg)
            partition = 0
        if partition >= info.partitions:
            msg = f"topic {info.name} has no partition {partition} (0..{info.partitions - 1})"
            raise ConfigError(msg)
        part = admin.stats(info.name)[partition]
        if initial_position == "earliest":
            offset = part.start_offset + message_position - 1
        else:
            offset = part.end_offset - message_position
        if not part.start_offset <= offset < part.end_offset:
            msg = (
                f"partition {partition} of topic {info.name} holds {part.messages} "
                f"message(s); there is no message {message_position} from the {initial_position}"
            )
            raise NotFoundError(msg)
        return TopicMessage.of(_read_one(store, info, part, offset), info)

    return router


def _read_one(store: Store, info: TopicInfo, part: PartitionStats, offset: int) -> ReceivedMessage:
    for batch in read_range(store, info, part.partition, offset, offset + 1):
        for message in messages_from_table(batch):
            return message
    # Retention removed it between the stats and the read.
    msg = f"message {part.partition}:{offset} of topic {info.name} is no longer retained"
    raise NotFoundError(msg)
