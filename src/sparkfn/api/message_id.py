"""The id of a message within its topic: :class:`MessageId`.

A message is identified by its partition and its offset there; ``str()``
gives ``partition:offset``. The methods are those of Pulsar's Python
``MessageId``, mapped onto that position: a partition of a sparkfn topic is
one ledger whose entries are its offsets.

>>> message_id = MessageId(2, 41)
>>> str(message_id), message_id.partition(), message_id.entry_id()
('2:41', 2, 41)
>>> MessageId.deserialize(message_id.serialize()) == message_id
True
"""

from __future__ import annotations

from functools import total_ordering


@total_ordering
class MessageId:
    """Where a message is: ``partition:offset``; ordered by partition, then offset."""

    __slots__ = ("_offset", "_partition")

    def __init__(self, partition: int, offset: int) -> None:
        self._partition = int(partition)
        self._offset = int(offset)

    def partition(self) -> int:
        """The partition of the topic the message is in."""
        return self._partition

    def entry_id(self) -> int:
        """The message's offset in its partition."""
        return self._offset

    def ledger_id(self) -> int:
        """Always 0: a partition is one ledger, its offsets are the entries."""
        return 0

    def batch_index(self) -> int:
        """Always -1: messages are stored one by one, never batched under one id."""
        return -1

    def serialize(self) -> bytes:
        """The id as bytes, to store and read back with :meth:`deserialize`."""
        return str(self).encode()

    @staticmethod
    def deserialize(data: bytes | str, topic: str | None = None) -> MessageId:
        """An id from :meth:`serialize`'s bytes (or its ``str``); ``topic`` is accepted, as in Pulsar."""
        text = data.decode() if isinstance(data, bytes) else data
        partition, sep, offset = text.partition(":")
        try:
            if not sep:
                raise ValueError(text)
            return MessageId(int(partition), int(offset))
        except ValueError:
            msg = f"{text!r} is not a message id (partition:offset)"
            raise ValueError(msg) from None

    def _key(self) -> tuple[int, int]:
        return (self._partition, self._offset)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return f"{self._partition}:{self._offset}"

    def __repr__(self) -> str:
        return f"MessageId({self._partition}, {self._offset})"
