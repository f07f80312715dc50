"""Consuming messages from a topic, from a position or a durable subscription.

>>> consumer = Consumer(store, "orders", subscription="audit", initial_position="earliest")
>>> for message in consumer.receive(max_messages=100):
...     handle(message)
>>> consumer.acknowledge()   # persist the cursor: a restart resumes after these

Without a subscription a consumer is a reader: it keeps its position in
memory only.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Literal

from sqlalchemy import and_, insert, select, update

from sparkfn.api.errors import ConfigError
from sparkfn.config.names import TopicName
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.log import end_offsets
from sparkfn.topics.message import ReceivedMessage, messages_from_table
from sparkfn.topics.reading import read_range
from sparkfn.topics.received import collector_paused

Position = Literal["earliest", "latest"]


class Consumer:
    """Reads a topic's partitions in turn, tracking the next offset of each."""

    def __init__(
        self,
        store: Store,
        topic: str | TopicName,
        *,
        subscription: str | None = None,
        initial_position: Position = "latest",
        start_offsets: dict[int, int] | None = None,
        partitions: Collection[int] | None = None,
    ) -> None:
        if initial_position not in ("earliest", "latest"):
            msg = f"initial_position must be 'earliest' or 'latest'; got {initial_position!r}"
            raise ConfigError(msg)
        self.store = store
        self.topic = TopicAdmin(store).get(topic)
        self.subscription = subscription
        bounds = end_offsets(store, self.topic)
        self.positions: dict[int, int] = {}
        for part, (start, end) in bounds.items():
            if partitions is None or part in partitions:  # only those partitions, if given
                self.positions[part] = start if initial_position == "earliest" else end
        if partitions is not None and set(partitions) - set(bounds):
            msg = f"topic {self.topic.name} has no partition {min(set(partitions) - set(bounds))}"
            raise ConfigError(msg)
        if start_offsets:
            for part, offset in start_offsets.items():
                if part not in bounds:
                    msg = f"topic {self.topic.name} has no partition {part}"
                    raise ConfigError(msg)
                self.positions[part] = max(offset, bounds[part][0])
        if subscription is not None:
            self._load_cursor()

    def _load_cursor(self) -> None:
        table = schema.subscriptions
        where = and_(table.c.topic_id == self.topic.id, table.c.name == self.subscription)
        with self.store.write() as conn:
            stored = {
                r.partition: r.cursor
                for r in conn.execute(select(table.c.partition, table.c.cursor).where(where))
            }
            missing = [
                {
                    "topic_id": self.topic.id,
                    "name": self.subscription,
                    "partition": part,
                    "cursor": offset,
                    "updated_at": utc_now(),
                }
                for part, offset in self.positions.items()
                if part not in stored
            ]
            if missing:
                conn.execute(insert(table), missing)
        self.positions.update({p: c for p, c in stored.items() if p in self.positions})

    def receive(self, max_messages: int = 1000, timeout: float = 0.0) -> list[ReceivedMessage]:
        """Up to ``max_messages`` new messages; waits up to ``timeout`` s for the first."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._poll(max_messages)
            if found or time.monotonic() >= deadline:
                return found
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def _poll(self, max_messages: int) -> list[ReceivedMessage]:
        with collector_paused():
            return self._read(max_messages)

    def _read(self, max_messages: int) -> list[ReceivedMessage]:
        out: list[ReceivedMessage] = []
        bounds = end_offsets(self.store, self.topic)
        for part in sorted(self.positions):
            start = max(self.positions[part], bounds[part][0])
            end = min(bounds[part][1], start + max_messages - len(out))
            if end <= start:
                continue
            # read_range skips offsets that expired: where it ends is not
            # start + count, but the last batch's offsets say it.
            last = start - 1
            for batch in read_range(self.store, self.topic, part, start, end):
                out.extend(messages_from_table(batch))
                last = batch.column("offset")[-1].as_py()
            self.positions[part] = last + 1
            if len(out) >= max_messages:
                break
        return out

    def acknowledge(self) -> None:
        """Persist the current positions as the subscription's cursor (cumulative ack)."""
        if self.subscription is None:
            msg = "acknowledge needs a consumer with a subscription name"
            raise ConfigError(msg)
        table = schema.subscriptions
        with self.store.write() as conn:
            for part, offset in self.positions.items():
                conn.execute(
                    update(table)
                    .where(
                        and_(
                            table.c.topic_id == self.topic.id,
                            table.c.name == self.subscription,
                            table.c.partition == part,
                        )
                    )
                    .values(cursor=offset, updated_at=utc_now())
                )
