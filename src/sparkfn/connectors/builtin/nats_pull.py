"""A JetStream pull consumer's fetch, on nats-py's core subscribe and publish.

nats-py's ``PullSubscription.fetch(n)`` waits for each of the ``n`` messages
with its own ``asyncio.wait_for`` (a task and a timer per message): about
20 µs of CPU a message, most of what the NATS source cost and four times what
the rest of a read takes (docs/connectors.md, "where the time went").
:class:`Puller` asks for a batch as JetStream's pull API does (a request on
``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`` naming an inbox, with the
batch size and an expiry) and takes what the server sends to that inbox in
a callback that only appends it: the fetch wakes once the batch is full or
the server ends the request with a status message (``408``: it expired,
``404``: nothing to wait for, ``409``: e.g. too many waiting pulls). A fetch
without ``wait`` asks with ``no_wait``: the server sends what the consumer
has now and ends the request at once. :func:`reply_fields` reads what a
record needs from a message's reply subject.

The messages are nats-py's own ``Msg`` objects, acked as before
(``msg.ack()`` publishes to their reply subject). Messages that arrive after
a fetch returned (a request that ended late) are kept for the next fetch:
nothing the server delivered is dropped; what is never acked comes again
after the consumer's ack wait, as with every message read and not acked.
"""

from __future__ import annotations

import asyncio
import json

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

# The statuses that end a pull request without a fault (nats-py takes them so too).
END_STATUSES = frozenset({"404", "408", "409"})
# An idle heartbeat (only if asked for; this fetch does not ask).
HEARTBEAT = "100"
# How much longer than the request's expiry a fetch waits for the server's 408.
EXPIRY_SLACK = 1.0


class PullError(nats.errors.Error):
    """The server answered a pull request with a status that is not one of its ends."""


class Puller:
    """Fetches from one durable pull consumer through an inbox of its own."""

    def __init__(self, nc: Client, stream: str, consumer: str) -> None:
        self.nc = nc
        self.subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self.inbox = nc.new_inbox()
        self.buffer: list[Msg] = []
        self._want = 0
        self._ended = False
        self._fault: PullError | None = None
        self._wake = asyncio.Event()

    async def start(self) -> None:
        """Subscribe to the inbox (on the loop the fetches run on)."""
        await self.nc.subscribe(self.inbox, cb=self._on_message)

    async def _on_message(self, msg: Msg) -> None:
        headers = msg.headers
        status = headers.get("Status") if headers else None
        if status is None:
            self.buffer.append(msg)
            if len(self.buffer) >= self._want:
                self._wake.set()
        elif status != HEARTBEAT:
            if status not in END_STATUSES:
                text = headers.get("Description", "") if headers else ""
                self._fault = PullError(f"pull request answered {status} {text}".strip())
            self._ended = True
            self._wake.set()

    def fault(self) -> PullError | None:
        """The status the last pull request ended with, if it was not one of its ends."""
        return self._fault

    async def fetch(self, batch: int, expires: float, wait: bool = True) -> list[Msg]:
        """Up to ``batch`` messages: what is kept, or what one pull request of at most
        ``expires`` seconds brings (fewer once it expires). ``wait`` false: only what
        the consumer has now (``no_wait``: the server ends the request at once)."""
        if not self.buffer:
            self._want, self._ended, self._fault = batch, False, None
            self._wake.clear()
            request: dict[str, object] = {"batch": batch}
            if wait:
                request["expires"] = int(expires * 1_000_000_000)
            else:
                request["no_wait"] = True
                expires = 0.0
            await self.nc.publish(self.subject, json.dumps(request).encode(), reply=self.inbox)
            try:
                await asyncio.wait_for(self._wake.wait(), expires + EXPIRY_SLACK)
            except TimeoutError:
                if self.nc.is_closed:
                    raise nats.errors.ConnectionClosedError from None
            fault = self.fault()
            if fault is not None and not self.buffer:
                raise fault
        taken, self.buffer = self.buffer[:batch], self.buffer[batch:]
        return taken


def reply_fields(msg: Msg) -> tuple[str, str, int]:
    """A JetStream message's delivery count and stream sequence (as text) and its time (ns).

    From its reply subject, ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer
    seq>.<ns>.<pending>`` (or two tokens more before the stream, one after): nats-py's
    ``msg.metadata`` made a dataclass and a ``datetime`` of it per message. Other forms
    are left to it (it raises ``NotJSMessageError``).
    """
    tokens = msg.reply.split(".") if msg.reply else []
    if len(tokens) >= 9 and tokens[0] == "$JS" and tokens[1] == "ACK":
        if len(tokens) == 9:
            return tokens[4], tokens[5], int(tokens[7])
        if len(tokens) >= 11:
            return tokens[6], tokens[7], int(tokens[9])
    meta = msg.metadata
    stamp = meta.timestamp
    nanos = int(stamp.timestamp()) * 1_000_000_000 + stamp.microsecond * 1000
    return str(meta.num_delivered), str(meta.sequence.stream), nanos
