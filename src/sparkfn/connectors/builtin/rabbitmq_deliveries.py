"""The ``rabbitmq`` source's deliveries, decoded from the connection's bytes by sparkfn.

pika decodes every frame into objects (a ``Method`` frame and its
``Basic.Deliver``, a ``Header`` frame and its ``BasicProperties``, a ``Body``
frame), has its channel assemble them, and the blocking adapter makes an event
of each delivery that it dispatches later: three frames a message, about 11 µs
of CPU and some eight objects the interpreter's collector tracks, most of what
the source cost before its append (docs/connectors.md, "where the time went").

:class:`Deliveries` takes the connection's incoming bytes first (pika's
``_on_data_available``). A delivery to the source's consumer whose three (or
more) frames are all there is read in place, in a few ``struct`` steps,
and handed to the source as plain values; its properties are read here when
they are only those the source uses or a publisher commonly sets
(``delivery_mode``, ``message_id``, ``timestamp``), else by pika's own
``BasicProperties.decode``. Every other frame (acks' answers, heartbeats, a
channel's close, anything not a delivery to this consumer) goes to pika as
before, one at a time and in order; a delivery cut at the end of the bytes
waits for the rest. pika's counters of bytes and frames received (which its
heartbeat check reads) are kept as pika keeps them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pika.frame
import pika.spec

FRAME = struct.Struct(">BHI")  # type, channel, size
DELIVER = 0x003C003C  # Basic.Deliver: class 60, method 60
BODY_HEADER = struct.Struct(">HHQH")  # class, weight, body size, property flags
TAG = struct.Struct(">QB")  # delivery tag, the redelivered bit
TIMESTAMP = struct.Struct(">Q")
FLAG_DELIVERY_MODE = pika.spec.BasicProperties.FLAG_DELIVERY_MODE
FLAG_MESSAGE_ID = pika.spec.BasicProperties.FLAG_MESSAGE_ID
FLAG_TIMESTAMP = pika.spec.BasicProperties.FLAG_TIMESTAMP
SIMPLE = FLAG_DELIVERY_MODE | FLAG_MESSAGE_ID | FLAG_TIMESTAMP
FRAME_END = pika.spec.FRAME_END

# (delivery tag, redelivered, exchange, routing key, message id, headers, timestamp, body)
Deliver = Callable[
    [int, bool, "str | bytes", "str | bytes", Any, "dict[str, Any] | None", "int | None", bytes],
    None,
]


def short_string(buf: bytes, pos: int) -> tuple[str | bytes, int]:
    """An AMQP short string as pika gives it: text if it is UTF-8, else bytes."""
    end = pos + 1 + buf[pos]
    raw = buf[pos + 1 : end]
    try:
        return raw.decode(), end
    except UnicodeDecodeError:
        return raw, end


class Deliveries:
    """Decodes the deliveries to one consumer of one channel (see the module docstring)."""

    def __init__(self, connection: Any, channel: int, deliver: Deliver) -> None:
        self.connection = connection
        self.impl = connection._impl  # noqa: SLF001 - pika's connection under the adapter
        self.channel = channel
        self.deliver = deliver
        self.consumer_tag: bytes | None = None  # set once the consumer exists
        self.pika_data_available = self.impl._on_data_available  # noqa: SLF001
        self.impl._on_data_available = self.data_available  # noqa: SLF001

    def data_available(self, data: bytes) -> None:
        """pika's ``_on_data_available``: deliveries here, every other frame to pika."""
        impl = self.impl
        buf = impl._frame_buffer + data if impl._frame_buffer else data  # noqa: SLF001
        pos, size, delivered = 0, len(buf), False
        while pos + 7 <= size:
            end = self._delivery(buf, pos, size)
            if end > pos:
                pos, delivered = end, True
                continue
            if end < 0:
                break  # a delivery not all here yet
            consumed, frame = pika.frame.decode_frame(buf[pos:])
            if frame is None:
                break
            pos += consumed
            impl.bytes_received += consumed
            impl._process_frame(frame)  # noqa: SLF001 - what pika's own loop does with it
        impl._frame_buffer = buf[pos:]  # noqa: SLF001
        if delivered:
            # pika's own deliveries end a process_data_events() wait by an event queued;
            # these bypass its queues, so end the wait as pika's channels do (a negative
            # channel number: "return", nothing to dispatch).
            self.connection._request_channel_dispatch(-1)  # noqa: SLF001

    def _delivery(self, buf: bytes, pos: int, size: int) -> int:
        """Take the delivery at ``pos``: the position after it; ``pos`` if there is none
        there for this consumer (pika's frame); -1 if it is not all here yet."""
        kind, channel, length = FRAME.unpack_from(buf, pos)
        if kind != 1 or channel != self.channel or length < 4:
            return pos
        at = pos + 7
        method_end = at + length
        if method_end >= size:
            return -1
        if int.from_bytes(buf[at : at + 4], "big") != DELIVER or self.consumer_tag is None:
            return pos
        tag_end = at + 5 + buf[at + 4]
        if buf[at + 5 : tag_end] != self.consumer_tag:
            return pos
        delivery_tag, bits = TAG.unpack_from(buf, tag_end)
        exchange, at = short_string(buf, tag_end + 9)
        routing_key, _ = short_string(buf, at)
        # The header frame: class, weight, body size, property flags, properties.
        head = method_end + 1
        if head + 7 + 14 > size:
            return -1
        kind, channel, length = FRAME.unpack_from(buf, head)
        if kind != 2 or channel != self.channel:
            return pos  # not what a delivery is followed by: pika says what is wrong
        props_end = head + 7 + length
        if props_end >= size:
            return -1
        _, _, body_size, flags = BODY_HEADER.unpack_from(buf, head + 7)
        # The body frames, up to the body's size.
        parts, left, at, frames = [], body_size, props_end + 1, 2
        while left > 0:
            if at + 7 > size:
                return -1
            kind, channel, length = FRAME.unpack_from(buf, at)
            if kind != 3 or channel != self.channel:
                return pos
            if at + 7 + length >= size:
                return -1
            if buf[at + 7 + length] != FRAME_END:
                return pos
            parts.append(buf[at + 7 : at + 7 + length])
            left -= length
            at += 8 + length
            frames += 1
        if left < 0 or buf[method_end] != FRAME_END or buf[props_end] != FRAME_END:
            return pos  # a malformed delivery: pika's decoder says so
        message_id, headers, timestamp = self._properties(buf, head + 21, flags)
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        self.impl.bytes_received += at - pos
        self.impl.frames_received += frames
        self.deliver(delivery_tag, bool(bits & 1), exchange, routing_key, message_id, headers,
                     timestamp, body)  # fmt: skip
        return int(at)

    @staticmethod
    def _properties(
        buf: bytes, at: int, flags: int
    ) -> tuple[Any, dict[str, Any] | None, int | None]:
        """(message id, headers, timestamp) of a header frame's properties from ``at``."""
        if flags & ~SIMPLE:  # others too: pika's decoder, as pika would have read them
            props = pika.spec.BasicProperties()
            props.decode(buf, at - 2)
            return props.message_id, props.headers, props.timestamp
        message_id = timestamp = None
        if flags & FLAG_DELIVERY_MODE:
            at += 1
        if flags & FLAG_MESSAGE_ID:
            message_id, at = short_string(buf, at)
        if flags & FLAG_TIMESTAMP:
            timestamp = int(TIMESTAMP.unpack_from(buf, at)[0])
        return message_id, None, timestamp
