"""The ``redis`` connector's connections: redis-py's client, and the source's XREADGROUP socket.

:func:`connect` makes the checked redis-py client of the source and the sink.
:class:`StreamReader` is the source's XREADGROUP, on a connection of its own,
its replies parsed in few Python steps.

redis-py parses a reply one token at a time (a ``readline`` and a few calls
for every id, field name and value), then makes a dict of every entry's
fields: for entries of 100 bytes that was about 5 µs of CPU an entry, as
much as the rest of the source's work put together (the append included),
all of it under the interpreter lock the append's thread needs too
(docs/connectors.md, "where the time went"). :class:`StreamReader` sends
XREADGROUP in RESP2 on a socket of its own and reads the reply as bytes: the
usual entry, a value alone, is taken by one anchored regular expression
match and one slice; any other entry goes through :func:`parse_value`, a
plain RESP2 parser. XACK goes on the same socket; the source's other
commands (the check, the group's creation) stay on its redis-py client.

Errors are redis-py's, so that the source handles them as before: a lost or
timed-out connection is ``redis.exceptions.ConnectionError`` or
``TimeoutError``, an error reply ``ResponseError``.
"""

from __future__ import annotations

import re
import socket
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions
from redis.backoff import NoBackoff
from redis.retry import Retry

from sparkfn.api.errors import BrokerUnreachableError, ConfigError

if TYPE_CHECKING:
    from sparkfn.connectors.builtin.redis_streams import RedisConfig

# The client's errors that mean the server went away (a restart, a network cut).
LOST = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

# What one recv asks for: a 1,000-entry reply of 100-byte values is about 150 KB.
RECV_BYTES = 256 * 1024

# An entry's fields as XREADGROUP gives them: [name, value, ...]; None for an entry
# deleted while pending.
Entry = tuple[bytes, list[Any] | None]


def connect(cfg: RedisConfig, what: str) -> redis.Redis:
    """A checked client; unreachable server or bad password is a :class:`ConfigError`."""
    host, _, port = cfg.redisHosts.rpartition(":")
    client = redis.Redis(
        host=host,
        port=int(port),
        db=cfg.redisDatabase,
        password=cfg.redisPassword,
        socket_connect_timeout=cfg.connectTimeout / 1000,
        socket_timeout=cfg.operationTimeout / 1000,
        socket_keepalive=cfg.keepAlive,
        retry=Retry(NoBackoff(), 0),  # a failure is reported, not retried behind our back
    )
    try:
        client.ping()
    except redis.exceptions.AuthenticationError as exc:
        client.close()
        msg = f"{what}: configs.redisPassword: Redis at {cfg.redisHosts} refused it: {exc}"
        raise ConfigError(msg) from None
    except redis.exceptions.ResponseError as exc:
        client.close()
        msg = f"{what}: configs.redisDatabase/redisPassword: Redis at {cfg.redisHosts}: {exc}"
        raise ConfigError(msg) from None
    except redis.exceptions.RedisError as exc:
        client.close()
        msg = (
            f"{what}: configs.redisHosts: cannot reach Redis at {cfg.redisHosts} "
            f"(step: connect): {exc}"
        )
        raise BrokerUnreachableError(msg) from None
    return client


class Short(Exception):
    """The buffer ends inside the reply: more bytes are needed."""


def pack(*args: bytes | str | int) -> bytes:
    """A command as RESP2's array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def parse_value(buf: bytes, pos: int) -> tuple[Any, int]:
    """The RESP2 value at ``pos`` and the position after it; :class:`Short` if it is cut.

    Bulk strings are ``bytes``, simple strings ``bytes``, integers ``int``,
    arrays lists, nulls ``None``, an error reply a ``ResponseError`` (returned,
    not raised: it may sit inside an array).
    """
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Short
    kind = buf[pos]
    if kind == 36:  # $ bulk string
        size = int(buf[pos + 1 : end])
        if size < 0:
            return None, end + 2
        stop = end + 2 + size
        if stop + 2 > len(buf):
            raise Short
        return buf[end + 2 : stop], stop + 2
    if kind == 42:  # * array
        count = int(buf[pos + 1 : end])
        pos = end + 2
        if count < 0:
            return None, pos
        items = []
        for _ in range(count):
            item, pos = parse_value(buf, pos)
            items.append(item)
        return items, pos
    if kind == 58:  # : integer
        return int(buf[pos + 1 : end]), end + 2
    if kind == 43:  # + simple string
        return buf[pos + 1 : end], end + 2
    if kind == 45:  # - error
        return redis.exceptions.ResponseError(buf[pos + 1 : end].decode(errors="replace")), end + 2
    msg = f"Redis sent a reply this client does not read (type byte {bytes([kind])!r})"
    raise redis.exceptions.ConnectionError(msg)


def _array(buf: bytes, pos: int) -> tuple[int, int]:
    """The length of the array whose header is at ``pos``, and the position after it."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Short
    if buf[pos] != 42:
        msg = f"Redis reply out of step (an array expected, got {buf[pos : pos + 20]!r})"
        raise redis.exceptions.ConnectionError(msg)
    return int(buf[pos + 1 : end]), end + 2


class StreamReader:
    """One socket to Redis for XREADGROUP (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        password: str | None,
        db: int,
        connect_timeout: float,
        timeout: float,
        keepalive: bool,
        value_field: bytes,
    ) -> None:
        self.timeout = timeout
        # The usual entry: [id, [value_field, value]]; the value's length is group 2.
        self._usual = re.compile(
            rb"\*2\r\n\$\d+\r\n(\d+-\d+)\r\n\*2\r\n\$%d\r\n%s\r\n\$(\d+)\r\n"
            % (len(value_field), re.escape(value_field))
        )
        self._value_field = value_field
        self._buf = b""
        self._pos = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            error = _lost("connect", exc, connect_timeout)
            raise error from exc
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if keepalive:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            self._sock.settimeout(timeout)
            if password is not None:
                self._command(pack("AUTH", password))
            if db:
                self._command(pack("SELECT", db))
        except BaseException:
            self.close()
            raise

    def xreadgroup(
        self, group: str, consumer: str, stream: str, cursor: str, count: int, block: int | None
    ) -> list[Entry]:
        """The stream's entries XREADGROUP gives (none once ``block`` ms passed empty)."""
        ids, values = self.xreadgroup_columns(group, consumer, stream, cursor, count, block)
        field = self._value_field
        return [
            (i, [field, v] if isinstance(v, bytes) else v) for i, v in zip(ids, values, strict=True)
        ]

    def xreadgroup_columns(
        self, group: str, consumer: str, stream: str, cursor: str, count: int, block: int | None
    ) -> tuple[list[bytes], list[bytes | list[Any] | None]]:
        """XREADGROUP's entries as two lists: their ids, and for each its value (the usual
        entry, a value alone), else its fields as Redis sends them (``None``: deleted).
        No object per entry: the source makes its records from these."""
        args: list[bytes | str | int] = ["XREADGROUP", "GROUP", group, consumer, "COUNT", count]
        if block is not None:
            args += ["BLOCK", block]
        self._send(pack(*args, "STREAMS", stream, cursor))
        while True:  # the header: *1, then [stream name, *N entries]
            try:
                head, pos, count_at = self._head()
                break
            except Short:
                self._more()
        ids: list[bytes] = []
        values: list[bytes | list[Any] | None] = []
        if head is None:
            return ids, values
        add_id, add_value = ids.append, values.append
        usual, field = self._usual.match, self._value_field
        self._pos = pos
        for _ in range(count_at):
            while True:
                buf, pos = self._buf, self._pos
                found = usual(buf, pos)
                if found is not None:
                    start = found.end()
                    stop = start + int(found.group(2))
                    if stop + 2 <= len(buf):
                        if buf[stop : stop + 2] != b"\r\n":
                            msg = "Redis reply out of step (an entry's value does not end)"
                            raise redis.exceptions.ConnectionError(msg)
                        add_id(found.group(1))
                        add_value(buf[start:stop])
                        self._pos = stop + 2
                        break
                try:
                    entry, self._pos = parse_value(buf, pos)
                except Short:
                    self._more()
                    continue
                fields = entry[1]
                add_id(entry[0])
                # A value alone that the match did not take (cut by a recv) is one too.
                usual_one = fields is not None and len(fields) == 2 and fields[0] == field
                add_value(fields[1] if usual_one else fields)
                break
        return ids, values

    def xack(self, stream: str, group: str, ids: list[bytes]) -> int:
        """XACK ``ids``; how many were pending (redis-py packed 1,000 ids in 0.7 ms, this 0.2)."""
        acked: int = self._command(pack("XACK", stream, group, *ids))
        return acked

    def _head(self) -> tuple[Any, int, int]:
        """The reply up to its entries: (None if empty, position, number of entries)."""
        buf, pos = self._buf, self._pos
        if buf.find(b"\r\n", pos) < 0:
            raise Short
        if buf[pos] != 42:  # not an array: an error (or a reply we do not expect)
            value, self._pos = parse_value(buf, pos)
            if isinstance(value, Exception):
                raise value
            msg = f"XREADGROUP answered {value!r:.80}"
            raise redis.exceptions.ResponseError(msg)
        streams, pos = _array(buf, pos)
        if streams <= 0:  # *-1: BLOCK ran out (*0 cannot happen: taken as none)
            self._pos = pos
            return None, pos, 0
        _, pos = _array(buf, pos)  # [name, entries]
        _, pos = parse_value(buf, pos)  # the stream's name
        count, pos = _array(buf, pos)
        return True, pos, max(count, 0)

    def _command(self, data: bytes) -> Any:
        """Send a command and return its reply, raising an error reply."""
        self._send(data)
        while True:
            try:
                value, self._pos = parse_value(self._buf, self._pos)
                break
            except Short:
                self._more()
        self._buf, self._pos = self._buf[self._pos :], 0
        if isinstance(value, Exception):
            raise value
        return value

    def _send(self, data: bytes) -> None:
        # A reply read to its end leaves nothing: a new command starts a new buffer.
        self._buf, self._pos = self._buf[self._pos :], 0
        try:
            self._sock.sendall(data)
        except OSError as exc:
            error = _lost("send", exc, self.timeout)
            raise error from exc

    def _more(self) -> None:
        try:
            chunk = self._sock.recv(RECV_BYTES)
        except OSError as exc:
            error = _lost("reply", exc, self.timeout)
            raise error from exc
        if not chunk:
            error = _lost("reply", None, self.timeout)
            raise error
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0

    def close(self) -> None:
        """Close the socket."""
        self._sock.close()


def _lost(step: str, exc: OSError | None, timeout: float) -> redis.exceptions.RedisError:
    """redis-py's error for a socket's: a timeout or a lost connection (``None``: closed)."""
    if isinstance(exc, TimeoutError):
        return redis.exceptions.TimeoutError(f"{step}: timed out after {timeout:g} s")
    if exc is None:
        return redis.exceptions.ConnectionError(f"{step}: the server closed the connection")
    return redis.exceptions.ConnectionError(f"{step}: {exc}")
