"""``trigger``: send one value to a running function's input and return its output.

``POST /admin/v3/functions/{tenant}/{namespace}/{name}/trigger`` takes
Pulsar's multipart fields: ``data`` (the value as text) or ``dataStream``
(the value as a file, raw bytes), and ``topic`` (which input, when the
function has several); sparkfn adds ``timeout`` (seconds, default 30).

How the output is found: the value is produced to the input topic with the
property :data:`~sparkfn.runtime.function.rows.TRIGGER_PROPERTY` set to a
fresh id. The function does not see that property, and the output of that
message carries, instead of it, Pulsar's ``__pfn_input_topic__`` and
``__pfn_input_msg_id__`` naming the input message (as Pulsar's runtime
marks outputs, and whatever ``forward_source_message_property`` says). The
output topic is read from its end as it was before the value was sent, so
the first message there naming the input is the answer. If the function
fails on the value in every attempt, its dead-letter message (a copy of the
input) carries the id, and the answer is 422 ``trigger_failed`` with the
exception; a function that negative-acks (``max_message_retries``) answers
so at the value's first failure, found in its retry topic, saying when it
is delivered again. If no output comes within the timeout, 408
``trigger_timeout``.

>>> found = trigger(worker, "public/default/exclaim", "hello", topic=None, timeout=30)
>>> found.output.value
b'hello!'
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, File, Form, UploadFile

from sparkfn.api.errors import (
    ConfigError,
    FunctionNotRunningError,
    NoOutputTopicError,
    PayloadError,
    TopicNotFoundError,
    TriggerFailedError,
    TriggerTimeoutError,
)
from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.function.redelivery import DELAY_TIME
from sparkfn.runtime.function.rows import (
    DLQ_ATTEMPTS,
    DLQ_EXCEPTION,
    INPUT_MESSAGE_PROPERTY,
    INPUT_TOPIC_PROPERTY,
    TRIGGER_PROPERTY,
    without_partition,
)
from sparkfn.runtime.query.build import resolve_inputs
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage, SchemaType, encode_value
from sparkfn.topics.producer import Producer
from sparkfn.worker.api.params import Name, Namespace, Tenant
from sparkfn.worker.api.topic_models import ApiModel, TopicMessage
from sparkfn.worker.http import ErrorBody
from sparkfn.worker.service import Worker

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 300.0
# How long one read of the output topic waits for new messages, in seconds.
POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Triggered:
    """A triggered value's input message and the output the function produced from it."""

    input_topic: TopicInfo
    input_message_id: str
    output_topic: TopicInfo
    output: ReceivedMessage


def trigger(
    worker: Worker, fqfn: str, value: str | bytes, *, topic: str | None, timeout: float
) -> Triggered:
    """Send ``value`` to the function's input ``topic`` and wait for its output.

    A ``str`` is the value as text (for an ``avro`` input, the record as
    JSON); ``bytes`` are the stored value itself. Either is checked against
    the input topic's schema first.
    """
    config = worker.registry.get(fqfn).config
    if not config.output:
        msg = (
            f"function {fqfn} has no output topic, so a triggered value has no output "
            "to return; give it an output, or produce to its input instead"
        )
        raise NoOutputTopicError(msg)
    if fqfn not in worker.running():
        msg = f"function {fqfn} is not running here, so nothing would process a triggered value; start it first"
        raise FunctionNotRunningError(msg)
    store = worker.open_store()
    admin = TopicAdmin(store)
    input_topic = admin.get(_input_topic(store, config, topic))
    output_topic = admin.get(config.output)
    data = _encode(value, input_topic)
    trigger_id = uuid.uuid4().hex
    # Both read from what their topics hold now: an output of this value comes later.
    outputs = Consumer(store, output_topic.name, initial_position="latest")
    dead_letters = _DeadLetters(store, config.dead_letter_target)
    retries = _DeadLetters(store, config.retry_topic if config.negative_acks else None)
    # An unnamed producer drops nothing, so the id is never None.
    message_id = str(
        Producer(store, input_topic.name).send_batch(
            [Message(data, properties={TRIGGER_PROPERTY: trigger_id})]
        )[0]
    )
    deadline = time.monotonic() + timeout
    while True:
        wait = max(0.0, min(POLL_SECONDS, deadline - time.monotonic()))
        for message in outputs.receive(1000, timeout=wait):
            props = message.properties
            if (
                props.get(INPUT_MESSAGE_PROPERTY) == message_id
                and without_partition(props.get(INPUT_TOPIC_PROPERTY, ""))
                == f"persistent://{input_topic.name}"
            ):
                return Triggered(input_topic, message_id, output_topic, message)
        failed = dead_letters.find(trigger_id)
        if failed is not None:
            msg = (
                f"function {fqfn} failed on the triggered value (message {message_id} of "
                f"{input_topic.name}) in {failed.properties.get(DLQ_ATTEMPTS, '?')} attempt(s): "
                f"{failed.properties.get(DLQ_EXCEPTION, 'no exception recorded')}; "
                f"it went to dead letter topic {config.dead_letter_target}"
            )
            raise TriggerFailedError(msg)
        nacked = retries.find(trigger_id)
        if nacked is not None:
            retries_left = config.max_message_retries
            after = (
                "without end (max_message_retries is unset)"
                if retries_left is None
                else f"up to {retries_left} time(s), before it goes to dead letter topic "
                f"{config.dead_letter_target}"
            )
            msg = (
                f"function {fqfn} failed on the triggered value (message {message_id} of "
                f"{input_topic.name}): {nacked.properties.get(DLQ_EXCEPTION, '?')}; it was "
                f"negative-acked and is delivered again after "
                f"{nacked.properties.get(DELAY_TIME, '?')} ms, {after}"
            )
            raise TriggerFailedError(msg)
        if time.monotonic() >= deadline:
            msg = (
                f"function {fqfn} gave no output on {output_topic.name} for the triggered "
                f"value (message {message_id} of {input_topic.name}) within {timeout:g} s: it "
                "may still be working through earlier input, have returned None, or have "
                "stopped (see its status)"
            )
            raise TriggerTimeoutError(msg)


def _input_topic(store: Store, config: FunctionConfig, topic: str | None) -> str:
    """The input a triggered value goes to: ``topic``, or the function's only input."""
    inputs = resolve_inputs(store, config)
    if topic is None or not topic.strip():
        if len(inputs) == 1:
            return inputs[0]
        msg = (
            f"function {config.fqfn} has {len(inputs)} inputs; name the one to send to "
            f"with topic: {', '.join(inputs)}"
        )
        raise ConfigError(msg)
    name = str(TopicName.parse(topic, field="topic"))
    if name not in inputs:
        msg = f"topic {name} is not an input of function {config.fqfn} (its inputs: {', '.join(inputs)})"
        raise ConfigError(msg)
    return name


def _encode(value: str | bytes, info: TopicInfo) -> bytes:
    """The stored value for ``info``: text by its schema, bytes as they are (checked)."""
    given: object = value
    if isinstance(value, str) and info.schema_type is SchemaType.AVRO:
        try:
            given = json.loads(value)
        except ValueError as exc:
            msg = f"topic {info.name} (schema avro): data must be the record as JSON: {exc}"
            raise PayloadError(msg) from None
    return encode_value(
        given, info.schema_type, topic=str(info.name), definition=info.schema_definition
    )


class _DeadLetters:
    """The function's dead-letter topic, read from its end now (it may appear later)."""

    def __init__(self, store: Store, topic: str | None) -> None:
        self.store = store
        self.topic = topic
        self.consumer: Consumer | None = None
        if topic is not None and TopicAdmin(store).exists(topic):
            self.consumer = Consumer(store, topic, initial_position="latest")

    def find(self, trigger_id: str) -> ReceivedMessage | None:
        """The dead letter of the triggered value, if it has come."""
        if self.topic is None:
            return None
        if self.consumer is None:
            try:  # created on the function's first dead letter: all of it is new
                self.consumer = Consumer(self.store, self.topic, initial_position="earliest")
            except TopicNotFoundError:
                return None
        for message in self.consumer.receive(1000):
            if message.properties.get(TRIGGER_PROPERTY) == trigger_id:
                return message
        return None


class TriggerResult(ApiModel):
    """What ``trigger`` answers: where the value went and the output it gave."""

    input_topic: str
    input_message_id: str
    output: TopicMessage


def trigger_router(worker: Worker) -> APIRouter:
    """The ``/{tenant}/{namespace}/{name}/trigger`` route (under ``/admin/v3/functions``)."""
    router = APIRouter(tags=["functions"])
    limit = worker.settings.max_upload_bytes

    @router.post(
        "/{tenant}/{namespace}/{name}/trigger",
        response_model=TriggerResult,
        responses={
            408: {"model": ErrorBody, "description": "No output within the timeout."},
            422: {"model": ErrorBody, "description": "The function failed on the value."},
        },
    )
    def trigger_function(
        tenant: Tenant,
        namespace: Namespace,
        name: Name,
        data: Annotated[str | None, Form(description="The value, as text.")] = None,
        data_stream: Annotated[
            UploadFile | None, File(alias="dataStream", description="The value, as a file.")
        ] = None,
        topic: Annotated[str | None, Form(description="The input to send it to.")] = None,
        timeout: Annotated[
            float, Form(gt=0, le=MAX_TIMEOUT, description="Seconds to wait for the output.")
        ] = DEFAULT_TIMEOUT,
    ) -> TriggerResult:
        """Send one value to the function's input; answer the output it produced from it."""
        fqfn = f"{tenant}/{namespace}/{name}"
        if (data is None) == (data_stream is None):
            msg = f"function {fqfn}: give the value as data (text) or dataStream (a file), not both or neither"
            raise ConfigError(msg)
        value: str | bytes = data or ""
        if data_stream is not None:
            value = data_stream.file.read(limit + 1)
            if len(value) > limit:
                msg = f"function {fqfn}: dataStream is over the worker's limit of {limit} bytes"
                raise PayloadError(msg)
        found = trigger(worker, fqfn, value, topic=topic, timeout=timeout)
        return TriggerResult(
            input_topic=f"persistent://{found.input_topic.name}",
            input_message_id=found.input_message_id,
            output=TopicMessage.of(found.output, found.output_topic),
        )

    return router
