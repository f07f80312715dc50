"""The ``redis`` sink's commands: laid out in RESP2 by sparkfn, sent as one MULTI/EXEC.

redis-py's pipeline packs every argument of every command through its encoder
(a few calls per argument) and parses each ``+QUEUED`` and each id of EXEC's
reply one token at a time: for 100-byte entries that was about two thirds of
the sink's CPU (docs/connectors.md, "where the time went"). Here
:func:`xadd` lays out one entry's XADD with the argument bytes redis-py would
send (text as UTF-8, integers in decimal), and :class:`StreamWriter` sends a
batch as ``MULTI``, its commands, ``EXEC`` in one write on a socket of its own
(:class:`~.redis_connection.StreamReader`'s) and checks the replies in a few
steps: the ``+OK`` and ``+QUEUED`` run compared as bytes, EXEC's array by one
regular-expression match when every command succeeded; anything else (an
error reply) goes through the plain RESP2 parser and is raised.

Errors are redis-py's, as the pipeline raised them: ``ResponseError`` for the
first command that failed (its index and command named), ``ConnectionError``
or ``TimeoutError`` for a lost or silent server.
"""

from __future__ import annotations

import re
from typing import Any

import redis.exceptions

from sparkfn.connectors.builtin.redis_connection import Short, StreamReader, parse_value

MULTI = b"*1\r\n$5\r\nMULTI\r\n"
EXEC = b"*1\r\n$4\r\nEXEC\r\n"
QUEUED = b"+QUEUED\r\n"


def bulk(arg: bytes | str | int) -> bytes:
    """One argument as a RESP2 bulk string (text as UTF-8, an integer in decimal)."""
    data = arg if isinstance(arg, bytes) else str(arg).encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


class StreamWriter(StreamReader):
    """The sink's socket to Redis: a batch of commands as one MULTI/EXEC."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, value_field=b"value", **kwargs)
        # The reply of n commands that all queued: +OK, then n times +QUEUED.
        self._queued: dict[int, bytes] = {}
        # EXEC's reply when each command gave an id (XADD) or OK (SET), by count.
        self._done: dict[int, re.Pattern[bytes]] = {}

    def transaction(self, commands: list[bytes]) -> None:
        """Run ``commands`` (each packed, as :func:`xadd` makes them) in one MULTI/EXEC."""
        count = len(commands)
        if not count:
            return
        queued = self._queued.get(count)
        if queued is None:
            queued = self._queued[count] = b"+OK\r\n" + QUEUED * count
            self._done[count] = re.compile(
                rb"\*%d\r\n(?:\$\d+\r\n\d+-\d+\r\n|\+OK\r\n){%d}" % (count, count)
            )
        self._send(b"".join([MULTI, *commands, EXEC]))
        while True:
            buf, pos = self._buf, self._pos
            if buf.startswith(queued, pos):
                done = self._done[count].match(buf, pos + len(queued))
                if done is not None:
                    self._buf, self._pos = buf[done.end() :], 0
                    return
                try:  # cut, or an error among EXEC's replies
                    value, end = parse_value(buf, pos + len(queued))
                except Short:
                    self._more()
                    continue
                self._buf, self._pos = buf[end:], 0
                _raise_first(value if isinstance(value, list) else [value], commands)
                return
            if len(buf) - pos < len(queued) and queued.startswith(buf[pos:]):
                self._more()  # the run of +QUEUED is cut
                continue
            self._refused(count, commands)
            return

    def _refused(self, count: int, commands: list[bytes]) -> None:
        """A command was refused when queued (EXEC then answers EXECABORT): raise it."""
        while True:
            buf, pos = self._buf, self._pos
            replies: list[Any] = []
            try:
                for _ in range(count + 2):
                    value, pos = parse_value(buf, pos)
                    replies.append(value)
            except Short:
                self._more()
                continue
            self._buf, self._pos = buf[pos:], 0
            _raise_first(replies[1:-1] + [replies[0], replies[-1]], commands)
            return


def _raise_first(replies: list[Any], commands: list[bytes]) -> None:
    """Raise the first error reply, naming its command as redis-py's pipeline did."""
    for index, reply in enumerate(replies):
        if isinstance(reply, Exception):
            shown = commands[index][:80] if index < len(commands) else b"MULTI/EXEC"
            msg = f"Command # {index + 1} ({shown!r}) of pipeline caused error: {reply}"
            raise redis.exceptions.ResponseError(msg)


class Xadd:
    """One stream's XADD commands, laid out as redis-py sends them.

    ``head`` is ``XADD <stream> [MAXLEN ~ <n>] *``; :meth:`pack` adds an entry's
    fields in the sink's order: ``value``, ``topic``, ``messageId``, then
    ``key``, ``eventTime`` and ``properties`` when given.
    """

    def __init__(self, head: tuple[str, ...]) -> None:
        self.head = b"".join(bulk(arg) for arg in head)
        self.size = len(head)
        self.starts: dict[int, bytes] = {}  # by the number of optional fields
        self.topics: dict[str, bytes] = {}  # "topic" and its value, by topic

    def pack(
        self,
        value: bytes,
        topic: str,
        message_id: str,
        key: str | None,
        event_time: int | None,
        properties: str | None,
    ) -> bytes:
        """The entry's XADD command."""
        extra = (key is not None) + (event_time is not None) + (properties is not None)
        start = self.starts.get(extra)
        if start is None:
            count = self.size + 6 + 2 * extra
            start = self.starts[extra] = b"*%d\r\n%s$5\r\nvalue\r\n" % (count, self.head)
        named = self.topics.get(topic)
        if named is None:
            named = self.topics[topic] = b"$5\r\ntopic\r\n" + bulk(topic)
        mid = message_id.encode()
        parts = [start, b"$%d\r\n" % len(value), value, b"\r\n", named,
                 b"$9\r\nmessageId\r\n$%d\r\n%s\r\n" % (len(mid), mid)]  # fmt: skip
        if extra:
            if key is not None:
                parts += (b"$3\r\nkey\r\n", bulk(key))
            if event_time is not None:
                parts += (b"$9\r\neventTime\r\n", bulk(event_time))
            if properties is not None:
                parts += (b"$10\r\nproperties\r\n", bulk(properties))
        return b"".join(parts)
