"""The topics a ``topics_pattern`` gains while its reader runs, as Pulsar's pattern consumers find them.

Pulsar's pattern consumer looks for new matching topics every minute
(``patternAutoDiscoveryPeriod``). sparkfn's reader and a parked function's
supervisor do too, and sooner where they can: creating a topic touches
:data:`~sparkfn.store.signals.TOPICS_HINT` when it commits, so whoever
watches the pattern on this machine looks at once. The period is the
backstop for creations the kernel does not announce (another machine
writing to a shared data directory).

What a new topic holds was produced after the subscription began, so a
subscription takes it from its first message, whatever
``subscription_position`` said when it was made (see
:func:`sparkfn.runtime.query.build.adopt_pattern_topics`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy.exc import IntegrityError

from sparkfn.config.topics_pattern import TopicsPattern
from sparkfn.store import signals
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin, TopicInfo

_LOG = logging.getLogger("sparkfn.discovery")

# Pulsar's default ``patternAutoDiscoveryPeriod``: one minute.
DISCOVERY_SECONDS = 60.0

# A file's modification time moves in coarse ticks (a few ms): a topic created
# within this long of a touch that a list followed may leave the time as it
# was, so the next check lists again.
SAME_TICK_NS = 50_000_000


class TopicDiscovery:
    """Lists the topics whose full name (``tenant/ns/name``) ``pattern`` matches.

    Only the topics of the pattern's namespace are listed
    (:class:`~sparkfn.config.topics_pattern.TopicsPattern`): no regex reaches
    another namespace.

    :meth:`due` is cheap (a ``stat`` of the hint): callers ask it often and
    list only when a topic was created or a period went by.
    """

    def __init__(
        self, store_url: str, data_dir: str, pattern: str, period: float = DISCOVERY_SECONDS
    ) -> None:
        # The URL and directory, not a Store: a Spark reader holding this is pickled.
        self.store_url = store_url
        self.data_dir = data_dir
        self.pattern = TopicsPattern.parse(pattern, field="topicsPattern")
        self.period = period
        self._stamp = self._hint()
        self._listed = time.monotonic()
        self._recent = False  # the hint was touched just before the last list

    def _hint(self) -> tuple[int, ...]:
        return signals.stamp(Path(self.data_dir), [signals.TOPICS_HINT])

    def due(self) -> bool:
        """Whether a topic was created (on this machine) or a period passed since the last list."""
        return (
            self._recent
            or self._hint() != self._stamp
            or time.monotonic() - self._listed >= self.period
        )

    def listed(self) -> None:
        """The caller lists the topics now: :meth:`due` is false until the next creation or period."""
        # Stamped before the list: a topic created meanwhile makes the next call due.
        self._stamp = self._hint()
        self._listed = time.monotonic()
        self._recent = 0 < time.time_ns() - self._stamp[0] < SAME_TICK_NS

    def matching(self) -> list[TopicInfo]:
        """Every existing topic the pattern matches, sorted by name (see :meth:`listed`)."""
        self.listed()
        admin = TopicAdmin(Store.cached(self.store_url, self.data_dir))
        listed = admin.list(self.pattern.tenant, self.pattern.namespace_name)
        return [t for t in listed if self.pattern.matches(t.name)]

    def new_topics(self, known: Iterable[TopicInfo]) -> list[TopicInfo]:
        """The matching topics not in ``known`` (compared by id)."""
        ids = {t.id for t in known}
        return [t for t in self.matching() if t.id not in ids]

    def adopt(self, known: Iterable[TopicInfo], subscription_name: str | None) -> list[TopicInfo]:
        """The matching topics not in ``known``; an existing subscription named
        ``subscription_name`` gets their cursors at their first message now,
        before any plan can name them (a new one starts where its position says)."""
        added = self.new_topics(known)
        if not added:
            return added
        if subscription_name is not None:
            store = Store.cached(self.store_url, self.data_dir)
            try:
                with store.write() as conn:
                    subscription.adopt(conn, subscription_name, added)
            except IntegrityError:  # another reader of the subscription made them meanwhile
                with store.write() as conn:
                    subscription.adopt(conn, subscription_name, added)
        _LOG.info(
            "subscription %s: reading topics created since it began: %s",
            subscription_name or "(none)",
            ", ".join(str(t.name) for t in added),
        )
        return added
