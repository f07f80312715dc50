"""The ``nats`` sink's publishes to JetStream: a batch out, its acks back through one inbox.

nats-py's ``JetStreamContext.publish`` is a request per message: a future, an
``asyncio.wait_for`` (a task and a timer), its headers encoded from a dict,
and a ``PubAck`` dataclass made from the parsed JSON of each ack. For a
1,000-message batch that was about 70 µs of CPU a message, most of the sink
(docs/connectors.md, "where the time went"). :class:`Publisher` lays out
each message's ``HPUB`` itself (the same headers nats-py would send: keys
checked, values stripped, line breaks made spaces), with a reply subject
``<inbox>.<n>`` under one wildcard subscription of its own, hands a window
of them to the connection at once, and counts the acks in a callback that
looks at each ack's bytes (JSON is parsed only for an error). At most two
windows are in flight: the next one goes out once the one before it is
acked, and every wait is bounded by ``publishTimeoutMs``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from sparkfn.api.connector import Record
from sparkfn.connectors.builtin._config import payload

# nats-py's own rules for a header (nats/aio/client.py): a key of these characters,
# surrounding blanks dropped, line breaks in a value made spaces.
HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
VALUE_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
# What nats-py refuses in a subject it publishes to (it would break the protocol line).
SUBJECT_INVALID = re.compile(r"[ \t\r\n]")
# An ack of a message JetStream already had (b'{"stream":"S", "seq":1,"duplicate": true}').
DUPLICATE = re.compile(rb'"duplicate"\s*:\s*true')
# The reply of a publish no stream took: a status message, no body.
NO_RESPONDERS = "503"


def header_block(headers: Mapping[str, str]) -> bytes:
    """The headers as ``HPUB`` carries them (what nats-py's ``publish`` lays out)."""
    lines = [b"NATS/1.0\r\n"]
    for name, value in headers.items():
        key = name.strip()
        if not key:
            continue
        if not HEADER_KEY.fullmatch(key):
            raise nats.errors.BadHeaderError(key)
        lines.append(
            b"%s: %s\r\n" % (key.encode(), value.strip().translate(VALUE_NEWLINES).encode())
        )
    lines.append(b"\r\n")
    return b"".join(lines)


def sink_message(record: Record, id_prefix: str, stream: str | None) -> tuple[bytes, bytes]:
    """A sink's record as (header block, payload), with the headers the sink gave nats-py's
    ``js.publish``: the record's properties, its ``Nats-Msg-Id``, its key, then the
    stream the publish must land in."""
    props = record.properties
    headers = {str(k): str(v) for k, v in props.items()} if props else {}
    headers["Nats-Msg-Id"] = f"{id_prefix}:{record.topic}@{record.message_id}"
    if record.key is not None:
        headers["sparkfn-key"] = record.key
    if stream is not None:
        headers["Nats-Expected-Stream"] = stream
    return header_block(headers), payload(record.value)


class Publisher:
    """Publishes batches to one subject and waits for JetStream's ack of each message."""

    def __init__(self, nc: Client, subject: str, window: int) -> None:
        if not subject or SUBJECT_INVALID.search(subject):
            raise nats.errors.BadSubjectError
        self.nc = nc
        self.subject = subject
        self.window = window
        self.inbox = nc.new_inbox()
        self.sent = 0  # reply tokens used so far (never reused: a late ack is told apart)
        self._first = 0  # the first token of the batch under way
        self._acked = 0
        self._want = 0
        self._wake = asyncio.Event()
        self.errors: dict[int, str] = {}  # token -> why JetStream did not store it
        self.duplicates = 0

    async def start(self) -> None:
        """Subscribe to the inbox's replies (on the loop the publishes run on)."""
        await self.nc.subscribe(f"{self.inbox}.*", cb=self._on_ack)

    async def _on_ack(self, msg: Msg) -> None:
        token = int(msg.subject[len(self.inbox) + 1 :])
        if token < self._first:
            return  # of a batch that already failed
        data = msg.data
        if msg.headers and msg.headers.get("Status") == NO_RESPONDERS:
            self.errors[token] = "no stream takes the subject (no responders)"
        elif b'"error"' in data:
            error = json.loads(data).get("error", {})
            self.errors[token] = f"JetStream: {error.get('description')} (code {error.get('code')})"
        elif b'"duplicate"' in data and DUPLICATE.search(data):
            self.duplicates += 1
        self._acked += 1
        if self._acked >= self._want:
            self._wake.set()

    async def publish(
        self, messages: list[tuple[bytes, bytes]], timeout: float
    ) -> list[str | None]:
        """Publish each (header block, payload); wait for every ack. Returns, per message,
        None once stored (or dropped as a duplicate) or why JetStream refused it."""
        nc = self.nc
        if nc.is_closed:
            raise nats.errors.ConnectionClosedError
        first = self._first = self.sent
        self._acked, self.errors = 0, {}
        head = f"HPUB {self.subject} {self.inbox}."
        for start in range(0, len(messages), self.window):
            commands = []
            for token, (headers, data) in enumerate(
                messages[start : start + self.window], first + start
            ):
                if len(data) > nc.max_payload:
                    raise nats.errors.MaxPayloadError
                size = len(headers)
                commands.append(
                    b"%s%d %d %d\r\n%s%s\r\n"
                    % (head.encode(), token, size, size + len(data), headers, data)
                )
            self.sent = first + start + len(commands)
            nc.stats["out_msgs"] += len(commands)
            nc.stats["out_bytes"] += sum(len(d) for _, d in messages[start : start + self.window])
            # What nats-py's publish() ends with, once for the window.
            await nc._send_command(b"".join(commands))  # noqa: SLF001
            if nc._flush_queue is not None and nc._flush_queue.empty():  # noqa: SLF001
                await nc._flush_pending()  # noqa: SLF001
            await self._until(start, timeout)  # the windows before this one: acked
        await self._until(len(messages), timeout)
        return [self.errors.get(first + i) for i in range(len(messages))]

    async def _until(self, acked: int, timeout: float) -> None:
        """Wait until ``acked`` messages of the batch are acked, each ack within ``timeout``."""
        while self._acked < acked:
            self._want = acked
            self._wake.clear()
            before = self._acked
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                if self._acked == before:
                    if self.nc.is_closed:
                        raise nats.errors.ConnectionClosedError from None
                    raise nats.errors.TimeoutError from None
