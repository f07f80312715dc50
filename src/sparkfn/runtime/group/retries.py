"""A member's retry topic in its group's reader: negative-acked messages admitted once due.

A member whose failed messages are negative-acked
(:attr:`~sparkfn.config.function.FunctionConfig.negative_acks`,
:mod:`sparkfn.runtime.function.redelivery`) reads its retry topic beside its
inputs: :meth:`RetryAdmission.names` adds it, the reader's one topic lookup
finds it once it exists, and :meth:`RetryAdmission.adopt` gives the
member's subscription cursors on it at its first message (whatever the
subscription's position: none of its messages may be skipped).

Each message there carries its ``DELIVER_AT``. They are appended in commit
order with one delay, so their times rise along a partition (near enough:
a batch's instances stage a little apart), and :meth:`RetryAdmission.cap`
admits a partition up to its first message not yet due; what is not due
waits there, and the messages behind the failed one in its input went on
long ago. What is known due stays so, and the first not-yet-due offset and
its time are kept, so each message is read here once and an idle reader
reads none to know, and :meth:`RetryAdmission.due` tells it
to look again (and shortens its quiet wait) when that time comes.

A drain finishes what the member has: with ``max_message_retries`` its
retry topic is read to its live end, due or not (a message's remaining
deliveries are made at once), and the drain ends once no redelivery is
left, each message having been processed or dead-lettered. Unset (Pulsar's
default, redelivered without end) a drain would never end so: it reads the
inputs to their target and leaves the retry topic alone, so what waits
there (and what fails during the drain) stays, with the subscription's
cursor on it, and comes back when the function runs again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from sqlalchemy import Connection

from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.function.redelivery import deliver_at
from sparkfn.runtime.group.plan import MemberWork
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.reading import read_range
from sparkfn.topics.spark.planning import offset_key
from sparkfn.topics.spark.quiet import QuietWait

# How many retry messages one look reads at most to find the first not yet due.
SCAN_ROWS = 10_000
_MIN_WAIT = 0.01  # seconds: the shortest quiet wait a due retry asks for


def retry_name(config: FunctionConfig) -> str:
    """The member's retry topic as the store names it."""
    return str(TopicName.parse(config.retry_topic))


class RetryAdmission:
    """The reader's view of its members' retry topics; driver only, Spark's thread."""

    def __init__(self, quiet: QuietWait) -> None:
        self._quiet = quiet
        self._wait: float | None = None  # the quiet wait before a retry shortened it
        # (topic id, partition) -> every offset below this one is due (it stays so)
        self._due: dict[tuple[int, int], int] = {}
        # (topic id, partition) -> (its first offset not due yet, when it is due, in ms)
        self._next: dict[tuple[int, int], tuple[int, int]] = {}

    @staticmethod
    def names(config: FunctionConfig) -> list[str]:
        """The topics the member reads: its inputs, and its retry topic if it negative-acks."""
        return [*config.inputs, config.retry_topic] if config.negative_acks else config.inputs

    @staticmethod
    def drain_ends(
        config: FunctionConfig, available: Mapping[str, int], target: Mapping[str, int]
    ) -> dict[str, int]:
        """A drain's ends: its target's for the inputs, the live end for the retry topic
        (none when retries are unset: what waits there stays for the next run)."""
        retry = retry_name(config) + "#" if config.negative_acks else None
        forever = config.max_message_retries is None
        return {
            k: v if retry and k.startswith(retry) else min(v, target.get(k, 0))
            for k, v in available.items()
            if not (forever and retry and k.startswith(retry))
        }

    def cap(
        self,
        store: Store,
        config: FunctionConfig,
        topics: list[TopicInfo],
        base: Mapping[str, int],
        pending: dict[str, int],
        draining: bool,
    ) -> dict[str, int]:
        """``pending`` with the retry topic's partitions cut at their first message not due."""
        if not config.negative_acks or draining:
            return pending
        name = retry_name(config)
        out = dict(pending)
        for topic in (t for t in topics if str(t.name) == name):
            for part in range(topic.partitions):
                key = offset_key(topic, part)
                if key not in out:
                    self._next.pop((topic.id, part), None)  # read to its end: none waits
                else:
                    end = self._due_end(store, topic, part, base.get(key, 0), out[key])
                    if end > base.get(key, 0):
                        out[key] = end
                    else:
                        del out[key]
        return out

    def _due_end(self, store: Store, topic: TopicInfo, part: int, low: int, end: int) -> int:
        now = int(time.time() * 1000)
        ident = (topic.id, part)
        due = max(low, self._due.get(ident, 0))  # a message once due stays due
        waiting = self._next.get(ident)
        if waiting is not None and waiting[0] >= due and waiting[1] > now:
            return waiting[0]
        self._next.pop(ident, None)
        if due >= end:
            return end
        limit = min(end, due + SCAN_ROWS)
        for batch in read_range(store, topic, part, due, limit):
            offsets = batch.column("offset").to_pylist()
            for offset, props in zip(offsets, batch.column("properties").to_pylist(), strict=True):
                at = deliver_at(props)
                if at > now:
                    self._due[ident] = int(offset)
                    self._next[ident] = (int(offset), at)
                    return int(offset)
        self._due[ident] = limit
        return limit

    def due(self) -> bool:
        """Whether a retry message waiting to be due is due now; else the quiet wait is
        shortened to its time (and given back once none waits)."""
        if not self._next:
            if self._wait is not None:
                self._quiet.wait, self._wait = self._wait, None
            return False
        now = time.time() * 1000
        due = [ident for ident, (_, at) in self._next.items() if at <= now]
        for ident in due:  # looked at again by the plan this asks for
            del self._next[ident]
        if due:
            return True
        left = min(at for _, at in self._next.values()) / 1000 - now / 1000
        if self._wait is None:
            self._wait = self._quiet.wait
        self._quiet.wait = max(_MIN_WAIT, min(self._wait, left))
        return False

    @staticmethod
    def adopt(conn: Connection, work: MemberWork) -> None:
        """Cursors on the member's retry topic at its first message, where it has none."""
        config = work.member.config
        if not config.negative_acks:
            return
        name = retry_name(config)
        for topic in work.topics:
            keys = [offset_key(topic, p) for p in range(topic.partitions)]
            if str(topic.name) == name and any(k not in work.base for k in keys):
                subscription.ensure(conn, config.subscription, [topic], "earliest")
