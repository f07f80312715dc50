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
* ``subscription`` (a name), ``epoch`` (the run) and ``ackOnPlan``: the
  query reads from the subscription's cursors, not from Spark's checkpoint
  (see :mod:`sparkfn.topics.subscription`); ``startingOffsets`` applies
  only when the subscription does not exist yet. The subscription belongs
  to the run named by ``controlId`` (every plain reader, without one,
  shares :func:`~sparkfn.topics.subscription.reader_owner`): the first
  batch planned claims it, and a query of another owner fails at its first
  batch with :class:`~sparkfn.api.errors.SubscriptionInUseError`.
* ``topicsPattern`` (a regular expression over full topic names): topics
  created while the query runs that it matches are read too, from their
  first message (:mod:`sparkfn.topics.discovery`); ``topics`` holds those
  that matched when it started.
* ``instances`` and ``assignment`` (``shared``, ``failover``,
  ``key_shared``): rows get an ``instance_id`` column.
* ``admission`` (``module:callable``) and ``controlId``: a supervisor steers
  the reader through an :class:`~.admission.Admission` at every trigger: a
  drain caps input at its target offsets, a suspend admits nothing more,
  and both end with one end-of-stream batch whose rows are markers
  (``offset == -1``, one per live instance; the offsets key ``__final__``
  counts them); dead or shut-down instances get no input, their share goes
  to the live ones; and no batch starts while a death waits.
* ``probeEnds`` (JSON ``[[topic id, partition, end], ...]``, with a
  subscription): the query's batches read no further than these ends, and
  only these partitions, until the cursors reach them; then it reads as
  usual. A supervisor looking for the message that kills its Python worker
  starts the query so on part of the failed batch
  (:mod:`sparkfn.runtime.lifecycle.poison`).
* ``tickMs`` (with ``instances``): a batch runs at least every ``tickMs``
  milliseconds of the clock (the offsets key ``__tick__`` counts them),
  input or not, and carries a tick marker row (``offset == -2``) per live
  instance: a window function whose windows fire on the clock looks at them
  (:mod:`sparkfn.runtime.function.window`).
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
from sparkfn.topics.spark.admission import PARK, Admission, AdmissionView, load_admission
from sparkfn.topics.spark.options import choice, positive_int
from sparkfn.topics.spark.planning import (
    ASSIGNMENTS,
    FINAL_KEY,
    RESUME_KEY,
    TICK_KEY,
    FinalMarker,
    TickMarker,
    by_instance,
    cap,
    data_offsets,
    ends_stream,
    in_key_order,
    offset_key,
    record_budget,
    split_ranges,
    with_final,
)
from sparkfn.topics.spark.quiet import IDLE_WAIT_SECONDS, RUN_WAIT_SECONDS, QuietWait
from sparkfn.topics.spark.rows import TaskRows
from sparkfn.topics.spark.tasks import (
    TASK_FUNCTION_OPTION,
    decode_task_function,
    freeze_imports,
)

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
        self.tick_ms = positive_int(opts, "tickMs", None)
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
        self.probe = self._probe_ends(opts.get("probeends"))
        self._cut = False  # the batch planned last reads less than its offsets (a probe)
        self.task_function = opts.get(TASK_FUNCTION_OPTION.lower())
        hints = [signals.topic_hint(t.id) for t in self.topics]
        if self._discovery is not None:
            hints.append(signals.TOPICS_HINT)
        if opts.get("controlid"):
            hints.append(signals.control_hint(opts["controlid"]))
        self._quiet = QuietWait(
            self._data_path,
            hints,
            recheck=signals.recheck_seconds(self.store_url),
            wait=min(
                RUN_WAIT_SECONDS if opts.get("controlid") else IDLE_WAIT_SECONDS,
                self.tick_ms / 1000 if self.tick_ms else RUN_WAIT_SECONDS,
            ),
        )
        self._reported: tuple[float, dict[str, int]] | None = None
        self.admission: Admission | None = None
        control_id = opts.get("controlid")
        self.control_id = control_id  # owns the subscription (None: a plain reader)
        if control_id is not None:
            spec = opts.get("admission")
            if not spec:
                msg = "sparkfn data source: option 'controlId' needs option 'admission'"
                raise ConfigError(msg)
            self.admission = load_admission(spec, self.store_url, self.data_dir, control_id)

    def _store(self) -> Store:
        return Store.cached(self.store_url, self.data_dir)

    def _probe_ends(self, text: str | None) -> dict[str, int] | None:
        """Option ``probeEnds`` by offsets key (see the module docstring)."""
        if not text:
            return None
        if self.subscription is None:
            msg = "sparkfn data source: option 'probeEnds' needs option 'subscription'"
            raise ConfigError(msg)
        names = {t.id: t for t in self.topics}
        try:
            return {offset_key(names[tid], part): int(end) for tid, part, end in json.loads(text)}
        except (ValueError, TypeError, KeyError) as exc:
            msg = f"sparkfn data source: option 'probeEnds' {text!r} is not [[topic id, partition, end], ...] of its topics"
            raise ConfigError(msg) from exc

    def _probing(self, cursors: Mapping[str, int]) -> bool:
        """Whether the probe's ends are still ahead of ``cursors`` (else the probe is over)."""
        if self.probe is not None and all(cursors.get(k, 0) >= e for k, e in self.probe.items()):
            self.probe = None
        return self.probe is not None

    def _view(self) -> AdmissionView | None:
        if self.admission is None:
            return None
        return self.admission.view(self.instances or 1)

    def _live(self, view: AdmissionView | None) -> list[int] | None:
        if self.instances is None:
            return None
        return list(view.live) if view is not None else list(range(self.instances))

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
        if not self._tick_due(start) and self._quiet.nothing_new(start):
            return in_key_order(start)
        end = in_key_order(self._latest(start, limit))
        self._quiet.answered(start, end)
        return end

    def _tick_due(self, start: Mapping[str, int]) -> int | None:
        """The clock's tick now, if it is past ``start``'s (option ``tickMs``)."""
        if self.tick_ms is None:
            return None
        tick = int(time.time() * 1000) // self.tick_ms
        return tick if tick > start.get(TICK_KEY, 0) else None

    def _discover(self, view: AdmissionView | None) -> None:
        """Read the topics ``topicsPattern`` gained too (see :mod:`sparkfn.topics.discovery`);
        at once when a drain's target names a partition the reader does not know."""
        if self._discovery is None:
            return
        target = view.drain_target if view is not None and view.stop_mode == "drain" else None
        keys = (offset_key(t, p) for t in self.topics for p in range(t.partitions))  # lazy
        if self._discovery.due() or (target and not set(keys).issuperset(target)):
            added = self._discovery.adopt(self.topics, self.subscription)
            self.topics = [*self.topics, *added]
            self._quiet.watch(signals.topic_hint(t.id) for t in added)

    def _latest(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        view = self._view()
        self._discover(view)
        data = data_offsets(start)
        finals = start.get(FINAL_KEY, 0)
        base = self._base(data)
        available = (
            self.target
            if self.target is not None
            else {k: e for k, (_, e) in self._bounds().items()}
        )
        if view is not None:
            if self.instances is not None and not view.live:
                return start  # every instance is down: admit nothing
            if view.blocked:
                return start  # a death waits for the supervisor: no new batch
            mode = view.stop_mode
            if mode in ("cancel", PARK) or (mode and view.final_seq <= finals):
                return start
            if mode == "suspend":
                return {**start, FINAL_KEY: view.final_seq}
        if self._probing(base):
            # The batch reads [cursor, probe end) whatever Spark's offsets say (see _plan).
            return {**start, RESUME_KEY: start.get(RESUME_KEY, 0) + 1}
        if view is not None:
            mode = view.stop_mode
            if mode == "drain":
                target = view.drain_target or {}
                available = {k: min(available.get(k, 0), target.get(k, 0)) for k in available}
                if all(base.get(k, 0) >= end for k, end in available.items()):
                    return {**start, FINAL_KEY: view.final_seq}
        keys = set(base) | set(available)
        end = {key: max(base.get(key, 0), available.get(key, 0)) for key in keys}
        rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_records
        budget = record_budget(rows, self.max_bytes, self._bytes_per_record(base, end))
        if budget is not None:
            end = cap(base, end, budget)
        for key in (FINAL_KEY, RESUME_KEY, TICK_KEY):
            if key in start:
                end[key] = start[key]
        tick = self._tick_due(start)
        if tick is not None:
            end[TICK_KEY] = tick  # a batch runs, input or not: its ticks go to every instance
        if (
            data_offsets(end) == data
            and end != base
            and any(end[k] > base.get(k, 0) for k in end if not k.startswith("__"))
        ):
            # The subscription is behind Spark's checkpoint (it was reset):
            # the batch reads [cursor, end), which Spark would not run if
            # its offsets equalled the start it knows.
            end[RESUME_KEY] = start.get(RESUME_KEY, 0) + 1
        if (
            view is not None
            and view.stop_mode == "drain"
            and data_offsets(end) != data  # Spark runs the batch as data (not a resume)
            and self._ends_drain(base, end, available, view)
        ):
            end[FINAL_KEY] = view.final_seq  # the batch carries the end-of-stream markers
        return end

    def _ends_drain(
        self,
        base: Mapping[str, int],
        end: Mapping[str, int],
        target: Mapping[str, int],
        view: AdmissionView,
    ) -> bool:
        """Whether this batch reaches the drain's target and may end the stream itself
        (:func:`~.planning.ends_stream`), which saves the end-of-stream batch's trigger."""
        if self.task_function is None or self.instances is None or not view.live:
            return False
        if any(end.get(k, 0) < hi for k, hi in target.items()):
            return False
        return ends_stream(
            self.topics,
            {k: (base.get(k, 0), hi) for k, hi in data_offsets(end).items()},
            view.live,
            max_per_task=self.max_per_task,
            assignment=self.assignment,
            slots=self.slots,
        )

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
        view = self._view()
        live = self._live(view)
        final = end.get(FINAL_KEY, 0) > start.get(FINAL_KEY, 0)
        # A drain's last data batch may carry the markers (see _ends_drain).
        carries_data = final and data_offsets(end) != data_offsets(start)
        spans = self._plan(start, end, data_offsets(end) if carries_data or not final else {})
        # A final batch replayed by a later run (its stop is over, or asked again) has no
        # markers; nor has one that a probe cut short: messages before the target remain.
        current = (
            final
            and not self._cut
            and view is not None
            and view.stop_mode in ("drain", "suspend")
            and view.final_seq == end[FINAL_KEY]
        )
        if final and not carries_data:
            return [FinalMarker(i) for i in (live or [0])] if current else []
        ranges = split_ranges(
            self.topics,
            spans,
            max_per_task=self.max_per_task,
            live=live,
            assignment=self.assignment,
        )
        if current and live:
            return with_final(ranges, live, self.assignment)
        ticks: list[InputPartition] = []
        if end.get(TICK_KEY, 0) > start.get(TICK_KEY, 0) and live:
            ticks = [TickMarker(i) for i in live]
        if self.task_function is not None and live and self.assignment == "key_shared":
            # no shuffle follows to bring a key's rows together
            return [*by_instance(ranges, live), *ticks]
        return [*ranges, *ticks]

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
            self._cut = bool(
                data_end
                and self.probe is not None
                and self._probing(self._by_key(subscription.cursors(conn, self.subscription)))
            )
            if self._cut and self.probe is not None:
                ends = {
                    (t.id, p): self.probe[offset_key(t, p)]
                    for t in self.topics
                    for p in range(t.partitions)
                    if offset_key(t, p) in self.probe
                }
            if self.admission is not None and self.admission.parked(conn):
                ends = {}  # data seen just before the run was parked: read from the cursors later
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
                owner=self.control_id,
            )
        names = {t.id: t for t in self.topics}
        return {offset_key(names[s.topic_id], s.partition): (s.start, s.end) for s in plan.spans}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Runs on an executor: the partition's rows as Arrow batches, through the task function if any."""
        rows = TaskRows(self.store_url, self.data_dir, self.columns, self.properties_json).rows(
            partition
        )
        if self.task_function is None:
            return freeze_imports(rows)
        return freeze_imports(decode_task_function(self.task_function)(rows))

    def commit(self, end: dict[str, int]) -> None:
        """Spark finished everything up to ``end``; the subscription moved in the sink's commit."""
