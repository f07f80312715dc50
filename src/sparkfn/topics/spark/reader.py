"""The ``sparkfn`` stream reader: offsets, admission control and subscriptions.

Called on the driver (in Spark's Python runner) except :meth:`read`, which
runs in executors. Offsets are ``{"<topic>#<partition>": next_offset}``.

Options beyond those of :mod:`.source`:

* ``maxRecordsPerBatch`` / ``maxBytesPerBatch``: every batch is capped, by
  default at :data:`DEFAULT_MAX_RECORDS_PER_BATCH` records and
  :data:`DEFAULT_MAX_BYTES_PER_BATCH` bytes (estimated from the segment
  index), so a first start over a large backlog is worked off in steps.
  Each batch has a fixed cost (planning, Spark's checkpoint writes, the
  commit), so the defaults are large: 200k records made a 1M backlog take
  1.5 times as long as one batch did.
* ``subscription`` (a name), ``epoch`` and ``ackOnPlan``: the query reads
  from the subscription's cursors, not from Spark's checkpoint (see
  :mod:`sparkfn.topics.subscription`); ``startingOffsets`` applies only when
  the subscription does not exist yet. Every plain reader shares
  :func:`~sparkfn.topics.subscription.reader_owner` as the subscription's
  owner: a function's run owns its own, and a reader of it fails at its
  first batch with :class:`~sparkfn.api.errors.SubscriptionInUseError`.
* ``topicsPattern`` (a regular expression over full topic names): topics
  created while the query runs that it matches are read too, from their
  first message (:mod:`sparkfn.topics.discovery`); ``topics`` holds those
  that matched when it started.
* ``instances`` and ``assignment`` (``shared``, ``failover``,
  ``key_shared``): rows get an ``instance_id`` column.

A function's or a sink's run does not read through this source: its query
is a group's (:mod:`sparkfn.runtime.group`), of one member when it runs
alone, which plans from the same subscriptions and planning helpers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from sparkfn.api.errors import ConfigError
from sparkfn.config.settings import Settings
from sparkfn.store import signals
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.discovery import TopicDiscovery
from sparkfn.topics.log import end_offsets, mean_stored_size
from sparkfn.topics.message import SPARK_READ_TYPES
from sparkfn.topics.spark.options import choice, positive_int
from sparkfn.topics.spark.planning import (
    ASSIGNMENTS,
    RESUME_KEY,
    cap,
    data_offsets,
    in_key_order,
    offset_key,
    record_budget,
    split_ranges,
)
from sparkfn.topics.spark.quiet import IDLE_WAIT_SECONDS, QuietWait
from sparkfn.topics.spark.rows import TaskRows
from sparkfn.topics.spark.tasks import freeze_imports

DEFAULT_MAX_RECORDS_PER_TASK = 500_000
DEFAULT_MAX_RECORDS_PER_BATCH = 1_000_000
DEFAULT_MAX_BYTES_PER_BATCH = 256 * 1024 * 1024


class SparkfnStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads topics; called on the driver except :meth:`read` (executors)."""

    def __init__(self, opts: dict[str, str], columns: list[str]) -> None:
        settings = Settings.resolve(opts.get("datadir"), opts.get("storeurl"))
        self.store_url = settings.store_url
        self.data_dir = str(settings.data_dir)
        self._data_path = settings.data_dir  # for the hints, looked at on every idle call
        names = opts.get("topics") or opts.get("topic") or ""
        pattern = opts.get("topicspattern")
        if not names and not pattern:
            msg = (
                "sparkfn data source: option 'topic' (or 'topics') is required for reading, "
                "unless 'topicsPattern' is given"
            )
            raise ConfigError(msg)
        self._discovery = (
            TopicDiscovery(self.store_url, self.data_dir, pattern) if pattern else None
        )
        admin = TopicAdmin(self._store())
        self.topics = [admin.get(n.strip()) for n in names.split(",") if n.strip()]
        self.subscription = opts.get("subscription")
        if self._discovery is not None:
            # Created since the caller listed them: read whole, as any topic gained later.
            self.topics += self._discovery.adopt(self.topics, self.subscription)
            if not self.topics:
                msg = f"sparkfn data source: topicsPattern {pattern!r} matches no topic"
                raise ConfigError(msg)
        self.starting = choice(opts, "startingOffsets", ("earliest", "latest"), "latest")
        self.max_records: int = (
            positive_int(opts, "maxRecordsPerBatch", None) or DEFAULT_MAX_RECORDS_PER_BATCH
        )
        self.max_bytes = positive_int(opts, "maxBytesPerBatch", DEFAULT_MAX_BYTES_PER_BATCH)
        self.max_per_task = positive_int(opts, "maxRecordsPerTask", DEFAULT_MAX_RECORDS_PER_TASK)
        self.instances = positive_int(opts, "instances", None)
        self.assignment = choice(opts, "assignment", ASSIGNMENTS, "shared")
        self.slots = positive_int(opts, "taskSlots", None)  # the cluster's task slots
        self.epoch = int(opts.get("epoch", "0"))
        self.ack_on_plan = opts.get("ackonplan", "false").lower() == "true"
        # Producing only the columns the query uses saves their conversion in
        # the JVM, which costs more than reading them.
        self.columns = None if len(columns) == len(SPARK_READ_TYPES) else columns
        as_json = choice(opts, "propertiesAs", ("map", "json"), "map") == "json"
        self.properties_json = as_json and "properties" in columns
        self.target: dict[str, int] | None = None
        hints = [signals.topic_hint(t.id) for t in self.topics]
        if self._discovery is not None:
            hints.append(signals.TOPICS_HINT)
        self._quiet = QuietWait(
            self._data_path,
            hints,
            recheck=signals.recheck_seconds(self.store_url),
            wait=IDLE_WAIT_SECONDS,
        )
        self._reported: tuple[float, dict[str, int]] | None = None

    def _store(self) -> Store:
        return Store.cached(self.store_url, self.data_dir)

    def _bounds(self) -> dict[str, tuple[int, int]]:
        store = self._store()
        out = {}
        for topic in self.topics:
            for part, bounds in end_offsets(store, topic).items():
                out[offset_key(topic, part)] = bounds
        return out

    def _by_key(self, cursors: Mapping[tuple[int, int], int]) -> dict[str, int]:
        return {
            offset_key(t, p): cursors[(t.id, p)]
            for t in self.topics
            for p in range(t.partitions)
            if (t.id, p) in cursors
        }

    def _position(self) -> subscription.Position:
        return "earliest" if self.starting == "earliest" else "latest"

    def initialOffset(self) -> dict[str, int]:
        """Called once on the driver when a query starts with no checkpoint.

        With a subscription: its cursors (created at ``startingOffsets`` if
        it does not exist yet), so a new checkpoint resumes where the last
        commit left off.
        """
        if self.subscription is not None:
            with self._store().write() as conn:
                found = subscription.ensure(conn, self.subscription, self.topics, self._position())
            return in_key_order(self._by_key(found))
        index = 0 if self.starting == "earliest" else 1
        return in_key_order({key: bounds[index] for key, bounds in self._bounds().items()})

    def _base(self, data: dict[str, int]) -> dict[str, int]:
        """Where the next batch starts: the subscription's cursors, else Spark's offsets."""
        if self.subscription is None:
            return data
        with self._store().read() as conn:
            found = subscription.cursors(conn, self.subscription)
        return {**data, **self._by_key(found)}

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the end at what is committed now (``Trigger.AvailableNow``)."""
        self.target = {key: end for key, (_, end) in self._bounds().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerBatch`` (default :data:`DEFAULT_MAX_RECORDS_PER_BATCH`)."""
        return ReadMaxRows(self.max_records)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """The end of the next batch: what is available, capped by ``limit``, the byte cap and the run's admission.

        An idle query's calls wait for a commit hint (:class:`~.quiet.QuietWait`)
        and answer "nothing new" without asking the store while none changes.
        """
        if self._quiet.nothing_new(start):
            return in_key_order(start)
        end = in_key_order(self._latest(start, limit))
        self._quiet.answered(start, end)
        return end

    def _discover(self) -> None:
        """Read the topics ``topicsPattern`` gained too (see :mod:`sparkfn.topics.discovery`)."""
        if self._discovery is None:
            return
        if self._discovery.due():
            added = self._discovery.adopt(self.topics, self.subscription)
            self.topics = [*self.topics, *added]
            self._quiet.watch(signals.topic_hint(t.id) for t in added)

    def _latest(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        self._discover()
        data = data_offsets(start)
        base = self._base(data)
        available = (
            self.target
            if self.target is not None
            else {k: e for k, (_, e) in self._bounds().items()}
        )
        keys = set(base) | set(available)
        end = {key: max(base.get(key, 0), available.get(key, 0)) for key in keys}
        rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_records
        budget = record_budget(rows, self.max_bytes, self._bytes_per_record(base, end))
        if budget is not None:
            end = cap(base, end, budget)
        if RESUME_KEY in start:
            end[RESUME_KEY] = start[RESUME_KEY]
        if (
            data_offsets(end) == data
            and end != base
            and any(end[k] > base.get(k, 0) for k in end if not k.startswith("__"))
        ):
            # The subscription is behind Spark's checkpoint (it was reset):
            # the batch reads [cursor, end), which Spark would not run if
            # its offsets equalled the start it knows.
            end[RESUME_KEY] = start.get(RESUME_KEY, 0) + 1
        return end

    def _bytes_per_record(self, base: Mapping[str, int], end: Mapping[str, int]) -> float | None:
        """The mean stored size of the records next in line, in the partitions with data to admit."""
        if self.max_bytes is None:
            return None
        keys = [(t, p, offset_key(t, p)) for t in self.topics for p in range(t.partitions)]
        with self._store().read() as conn:
            return mean_stored_size(
                conn, [(t, p, base.get(k, 0)) for t, p, k in keys if end.get(k, 0) > base.get(k, 0)]
            )

    def reportLatestOffset(self) -> dict[str, int]:
        """What is committed now, for Spark's progress reports (at most a second old when idle)."""
        if (
            self._reported is None
            or not self._quiet.idle
            or time.monotonic() - self._reported[0] >= self._quiet.recheck
        ):
            ends = {k: e for k, (_, e) in self._bounds().items()}
            self._reported = (time.monotonic(), in_key_order(ends))
        return self._reported[1]

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """Split the batch into tasks (see :func:`~.planning.split_ranges`).

        With a subscription the batch reads ``[cursor, end)`` of each
        partition and the plan is recorded for the sink's commit.
        """
        spans = self._plan(start, end, data_offsets(end))
        live = list(range(self.instances)) if self.instances is not None else None
        return list(
            split_ranges(
                self.topics,
                spans,
                max_per_task=self.max_per_task,
                live=live,
                assignment=self.assignment,
            )
        )

    def _plan(
        self, start: dict[str, int], end: dict[str, int], data_end: dict[str, int]
    ) -> dict[str, tuple[int, int]]:
        data_start = data_offsets(start)
        if self.subscription is None:
            return {k: (data_start.get(k, 0), hi) for k, hi in data_end.items()}
        ends = {
            (t.id, p): data_end[offset_key(t, p)]
            for t in self.topics
            for p in range(t.partitions)
            if offset_key(t, p) in data_end
        }
        with self._store().write() as conn:
            plan = subscription.plan_batch(
                conn,
                self.subscription,
                self.topics,
                self._position(),
                epoch=self.epoch,
                spark_start=json.dumps(start, sort_keys=True),
                spark_end=json.dumps(end, sort_keys=True),
                ends=ends,
                ack_on_plan=self.ack_on_plan,
            )
        names = {t.id: t for t in self.topics}
        return {offset_key(names[s.topic_id], s.partition): (s.start, s.end) for s in plan.spans}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Runs on an executor: the partition's rows as Arrow batches."""
        rows = TaskRows(self.store_url, self.data_dir, self.columns, self.properties_json).rows(
            partition
        )
        return freeze_imports(rows)

    def commit(self, end: dict[str, int]) -> None:
        """Spark finished everything up to ``end``; the subscription moved in the sink's commit."""
