"""Producing over HTTP, on Pulsar's REST producer paths (``/topics/persistent/...``).

==========  =============================================================  =====================
verb        path                                                           what
==========  =============================================================  =====================
POST        ``/topics/persistent/{tenant}/{namespace}/{topic}``            routed by key, else
                                                                           round robin
POST        ``/topics/persistent/{tenant}/{namespace}/{topic}/partitions/  all to one partition
            {partition}``
==========  =============================================================  =====================

The body is Pulsar's ``ProducerMessages`` (:class:`~sparkfn.worker.api.topic_models.ProducerMessages`);
each payload is encoded and checked by the topic's own schema, as
``sparkfn topics produce`` checks it, and the messages are appended in one
atomic append: one invalid value, and none is appended. The answer is
Pulsar's ``ProducerAcks``, one message id per message in order (null for
a message dropped as a duplicate of its producer's sequence id).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path

from sparkfn.api.errors import ConfigError, PayloadError
from sparkfn.topics.message import Message, encode_value
from sparkfn.topics.producer import Producer
from sparkfn.worker.api.params import MAX_INT32, Namespace, Tenant, Topic
from sparkfn.worker.api.topic_models import (
    ProducerAck,
    ProducerAcks,
    ProducerMessage,
    ProducerMessages,
)
from sparkfn.worker.api.topics_api import TOPIC, topic_name
from sparkfn.worker.service import Worker

PartitionIndex = Annotated[
    int, Path(ge=0, le=MAX_INT32, description="The partition every message goes to.")
]


def produce_router(worker: Worker) -> APIRouter:
    """The ``/topics/persistent`` routes over the topics of the worker's store."""
    router = APIRouter(tags=["topics"])
    store = worker.open_store()

    def produce(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        request: ProducerMessages,
        partition: int | None,
    ) -> ProducerAcks:
        producer = Producer(store, topic_name(tenant, namespace, topic), name=request.producer_name)
        if request.producer_name is None and any(
            m.sequence_id is not None for m in request.messages
        ):
            msg = "a sequenceId needs a producerName: de-duplication is per named producer"
            raise ConfigError(msg)
        batch = [_message(producer, m, i) for i, m in enumerate(request.messages)]
        ids = producer.send_batch(batch, partition=partition) if batch else []
        return ProducerAcks(message_publish_results=[ProducerAck(message_id=i) for i in ids])

    @router.post(TOPIC, response_model=ProducerAcks)
    def produce_messages(
        tenant: Tenant, namespace: Namespace, topic: Topic, request: ProducerMessages
    ) -> ProducerAcks:
        """Append the messages, each routed by its key, else round robin."""
        return produce(tenant, namespace, topic, request, None)

    @router.post(TOPIC + "/partitions/{partition}", response_model=ProducerAcks)
    def produce_to_partition(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        partition: PartitionIndex,
        request: ProducerMessages,
    ) -> ProducerAcks:
        """Append the messages to one partition."""
        return produce(tenant, namespace, topic, request, partition)

    return router


def _message(producer: Producer, given: ProducerMessage, index: int) -> Message:
    """Message ``index`` of a request, its payload encoded by the topic's schema."""
    info = producer.topic
    value = None
    if given.payload is not None:
        try:
            value = encode_value(
                given.payload,
                info.schema_type,
                topic=str(info.name),
                definition=info.schema_definition,
            )
        except PayloadError as exc:
            msg = f"messages[{index}]: {exc}"
            raise PayloadError(msg) from exc
    return Message(
        value=value,
        key=given.key,
        properties=dict(given.properties),
        event_time=_utc(given.event_time),
        sequence_id=given.sequence_id,
    )


def _utc(moment: datetime | None) -> datetime | None:
    """``moment`` in UTC; a time without a zone is UTC already."""
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
