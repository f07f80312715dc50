"""The group's source, ``format("sparkfn-group")``: plans the members that have work.

Runs on the driver, in Spark's source runner, except :meth:`~GroupStreamReader.read`
(executors). Its offsets are not input positions (a member's is its subscription) but
``{"__gen__": n}``, bumped whenever some member has work, plus ``"__final__/<control id>":
seq`` for a member whose end-of-stream batch (drain, suspend) was planned. Each trigger
reads the members, their control records, their cursors and their inputs' ends in four
queries, and a shared group's batches are spaced (:class:`~.extras.BatchSpacing`).
A member has work when it is in its record's epoch, no death of it waits for its
supervisor, it has a live instance and it is not cancelled, and either its cursors are
behind its inputs' ends (capped by a drain's target; a retry topic's by what is due,
:mod:`.retries`) or its drain or suspend needs its end-of-stream batch.

:meth:`~GroupStreamReader.partitions` records each working member's plan
in its subscription (members in their steady state in a few statements,
:func:`sparkfn.topics.plans.plan_batches`, the others one by one), at most the member's row budget
(``max_records_per_batch``, else the group's ``memberBudget``), then packs
the members' ranges into at most ``taskSlots`` tasks by their rows: a batch
costs what its work costs, not what the number of members does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from sparkfn.api.errors import ConfigError, SparkfnError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.function import ProcessingGuarantee
from sparkfn.config.names import TopicName
from sparkfn.config.settings import Settings
from sparkfn.runtime.group import extras, retries, suspects
from sparkfn.runtime.group.members import Member, group_hint, members
from sparkfn.runtime.group.plan import GroupTask, MemberWork, pack
from sparkfn.runtime.lifecycle import control
from sparkfn.store import signals
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.log import ends_of
from sparkfn.topics.plans import PlanRequest, plan_batches
from sparkfn.topics.spark.options import positive_int
from sparkfn.topics.spark.planning import (
    FinalMarker,
    TickMarker,
    by_instance,
    cap,
    offset_key,
    split_ranges,
    with_final,
)
from sparkfn.topics.spark.quiet import RUN_WAIT_SECONDS, QuietWait
from sparkfn.topics.spark.tasks import freeze_imports

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

_LOG = logging.getLogger("sparkfn.group")

GROUP_FORMAT = "sparkfn-group"
GROUP_SCHEMA = "payload binary"
GEN_KEY = "__gen__"
FINAL_PREFIX = "__final__/"
# Records a member may take in a batch unless its max_records_per_batch says: a
# backlog is worked off in steps, the others' batches wait at most one step.
DEFAULT_MEMBER_BUDGET = 20_000
DEFAULT_MAX_RECORDS_PER_TASK = 500_000


class GroupStreamReader(DataSourceStreamReader):
    """The reader of one group's query; see the module docstring."""

    def __init__(self, opts: Mapping[str, str]) -> None:
        settings = Settings.resolve(opts.get("datadir"), opts.get("storeurl"))
        self.store_url = settings.store_url
        self.data_dir = str(settings.data_dir)
        self.group = opts.get("group") or ""
        if not self.group:
            msg = f"{GROUP_FORMAT} data source: option 'group' is required"
            raise ConfigError(msg)
        self.slots = positive_int(opts, "taskSlots", 2) or 2
        self.budget = positive_int(opts, "memberBudget", DEFAULT_MEMBER_BUDGET)
        self.max_per_task = positive_int(opts, "maxRecordsPerTask", DEFAULT_MAX_RECORDS_PER_TASK)
        self.bytes_budget = positive_int(opts, "memberBytes", None)
        self.member_seconds = float(sec) if (sec := opts.get("memberseconds")) else None
        self.parking = opts.get("parking", "false").lower() == "true"  # its run may park
        self.probes = extras.parse_probes(opts.get("probes"))
        self.exit_notes = extras.parse_notes(opts.get("exitnotes"))
        self._patterns = extras.PatternInputs(self.store_url, self.data_dir)
        self._ticking: list[Member] = []  # the members whose windows look at the clock
        self._planned: tuple[dict[str, int], dict[str, MemberWork]] | None = None  # see partitions
        self._quiet = QuietWait(
            settings.data_dir,
            [group_hint(self.group)],
            recheck=signals.recheck_seconds(self.store_url),
            wait=RUN_WAIT_SECONDS,
        )
        self._retries = retries.RetryAdmission(self._quiet)  # negative-acked messages
        self._spacing = extras.BatchSpacing(float(opts.get("spacing") or 0))

    def _store(self) -> Store:
        return Store.cached(self.store_url, self.data_dir)

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        """Called once when the group's query starts without a checkpoint."""
        return {GEN_KEY: 0}

    def work(self, start: Mapping[str, int]) -> tuple[dict[str, MemberWork], list[Member]]:
        """Each member's work for the batch after ``start``, and every member."""
        store = self._store()
        with store.read() as conn:
            found = members(conn, self.group, store.sealer)
            records = control.read_controls(conn, [m.control_id for m in found])
            # Looked up every trigger: a topic deleted and made again has another id.
            names = {m.control_id: self._retries.names(m.config) for m in found}
            known = TopicAdmin(store).get_many({n for ns in names.values() for n in ns}, conn)
            inputs = {
                m.control_id: [known.get(TopicName.parse(n)) for n in names[m.control_id]]
                for m in found
            }
            for m in found:  # a pattern's topics: listed when one was created, or now and then
                if m.config.topics_pattern:
                    listed = {t.id for t in inputs[m.control_id] if t is not None}
                    more = self._patterns.topics(m.control_id, m.config)
                    inputs[m.control_id] += [t for t in more if t.id not in listed]
            self._patterns.forget({m.control_id for m in found})
            topics = {t.id: t for ts in inputs.values() for t in ts if t is not None}
            ends = ends_of(conn, topics)
            cursors = subscription.cursors_of(conn, {m.config.subscription for m in found})
        hints = [group_hint(self.group), *(signals.topic_hint(t) for t in sorted(topics))]
        hints += [signals.control_hint(m.control_id) for m in found]
        if any(m.config.topics_pattern for m in found):
            hints.append(signals.TOPICS_HINT)
        self._quiet.hints = hints
        ticks = {m.control_id: t for m in found if (t := extras.tick_ms(m.config)) is not None}
        self._ticking = [m for m in found if m.control_id in ticks]
        if ticks:  # an idle call waits no longer than the shortest tick
            self._quiet.wait = min(RUN_WAIT_SECONDS, min(ticks.values()) / 1000)
        out: dict[str, MemberWork] = {}
        for m in found:
            record = records.get(m.control_id)
            mine = [t for t in inputs[m.control_id] if t is not None]
            if record is None or record.epoch != m.epoch or not mine:
                continue
            if any(r.dead and not r.handled for r in record.instances.values()):
                continue  # a death waits for the supervisor: nothing of it starts
            live = record.live(m.config.parallelism)
            mode = record.stop_mode
            planned = start.get(FINAL_PREFIX + m.control_id, 0)
            parked = record.state == control.PARKED
            if not live or parked or mode == "cancel" or (mode and record.final_seq <= planned):
                continue
            own = cursors.get(m.config.subscription, {})
            base = {
                offset_key(t, p): own[(t.id, p)]
                for t in mine
                for p in range(t.partitions)
                if (t.id, p) in own
            }
            available = {
                offset_key(t, p): ends.get((t.id, p), 0) for t in mine for p in range(t.partitions)
            }
            work = MemberWork(m, mine, live, base)
            work.exit_note = self.exit_notes.get(m.control_id)
            probe = extras.probe_ends(self.probes, m.control_id, mine)
            if probe is not None and all(base.get(k, 0) >= e for k, e in probe.items()):
                self.probes.pop(m.control_id, None)  # the probe is over: read as usual
                probe = None
            if probe is not None:
                # Part of a batch that killed a Python worker, nothing else, no markers.
                pending = {k: e for k, e in probe.items() if e > base.get(k, 0)}
                work.ends, work.capped = pending, True
                out[m.control_id] = work
                continue
            if mode == "suspend":
                work.final_seq = record.final_seq
                out[m.control_id] = work
                continue
            if mode == "drain":
                target = record.drain_target or {}
                available = self._retries.drain_ends(m.config, available, target)
                if all(base.get(k, 0) >= v for k, v in available.items()):
                    work.final_seq = record.final_seq
                    out[m.control_id] = work
                    continue
            # A partition without a cursor gets one from its plan (once it has a message).
            pending = {k: v for k, v in available.items() if v > base.get(k, 0)}
            pending = self._retries.cap(store, m.config, mine, base, pending, mode == "drain")
            work.tick = extras.tick_due(m.config, m.control_id, start)
            if not pending:
                if work.tick is not None:
                    out[m.control_id] = work  # the clock's tick alone
                continue
            lows = {k: base.get(k, 0) for k in pending}
            budget = extras.row_budget(store, m.config, mine, lows, self.budget, self.bytes_budget)
            work.ends = cap(lows, pending, budget) if budget else pending
            work.capped = work.ends != pending
            if (
                mode == "drain"
                and not work.capped
                and extras.ends_drain(work, self.max_per_task, self.slots)
            ):
                work.final_seq = record.final_seq  # its last data batch carries the markers
            out[m.control_id] = work
        return out, found

    def latestOffset(self, start: dict[str, int], limit: object) -> dict[str, int]:  # noqa: N802
        """The next batch's offsets: the generation bumped if a member has work, else ``start``.

        An idle group's calls wait for a hint (a member's input, its control
        record, the membership) and answer "nothing new" without asking the
        store while none changes.
        """
        self._spacing.wait()  # a shared group's batches start at least this far apart
        if not self._ticks_due(start) and self._quiet.nothing_new(start):
            return start
        work, found = self._quiet.look(self.work, start)
        end = dict(start)
        self._planned = (dict(start), work)  # partitions() of the batch it starts plans this
        if work:
            self._spacing.started(len(work))
            current = {m.control_id for m in found}
            end = {GEN_KEY: start.get(GEN_KEY, 0) + 1}
            for key, value in start.items():
                for prefix in (FINAL_PREFIX, extras.TICK_PREFIX):
                    if key.startswith(prefix) and key[len(prefix) :] in current:
                        end[key] = value
            for cid, w in work.items():
                if w.final_seq is not None:
                    end[FINAL_PREFIX + cid] = w.final_seq
                if w.tick is not None:
                    end[extras.TICK_PREFIX + cid] = w.tick
            end = dict(sorted(end.items()))
        self._quiet.answered(start, end)
        return end

    def _ticks_due(self, start: Mapping[str, int]) -> bool:
        """Whether a member's windows are due to look at the clock, or a retry is due again."""
        return self._retries.due() or any(
            extras.tick_due(m.config, m.control_id, start) is not None for m in self._ticking
        )

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """Record each working member's plan and pack the members' ranges into tasks.

        The work :meth:`latestOffset` found for ``start`` is planned (nothing commits in
        between), its live instances read again as the plans are recorded
        (:func:`~.extras.narrow_live`); a batch run again after a restart looks it up anew.
        """
        planned = self._planned
        self._planned = None
        work = planned[1] if planned is not None and planned[0] == start else self.work(start)[0]
        spark_start = json.dumps(start, sort_keys=True)
        spark_end = json.dumps(end, sort_keys=True)
        items: list[tuple[MemberWork, InputPartition]] = []
        refused: list[tuple[MemberWork, Exception]] = []
        with self._store().write() as conn:
            skip = extras.parked(conn, list(work)) if self.parking else set()
            skip |= extras.narrow_live(conn, work)  # the instances that take input now
            asked: list[tuple[MemberWork, bool, PlanRequest]] = []
            for cid, w in sorted(work.items()):
                if cid in skip:
                    continue  # its run parked, or none of its instances takes input: data waits
                final = w.final_seq is not None
                self._retries.adopt(conn, w)
                if final and end.get(FINAL_PREFIX + cid) != w.final_seq:
                    continue  # asked since this batch's offsets were taken: the next batch has it
                ends = {
                    (t.id, p): w.ends[offset_key(t, p)]
                    for t in w.topics
                    for p in range(t.partitions)
                    if offset_key(t, p) in w.ends
                }
                config = w.member.config
                request = PlanRequest(
                    config.subscription,
                    w.topics,
                    w.member.epoch,
                    cid,
                    ends,  # none for the end-of-stream markers alone
                    config.processing_guarantees is ProcessingGuarantee.AT_MOST_ONCE,
                )
                asked.append((w, final, request))
            # The members in their steady state in a few statements, the others one by one.
            steady = plan_batches(
                conn, [r for *_, r in asked], spark_start=spark_start, spark_end=spark_end
            )
            for w, final, request in asked:
                config = w.member.config
                plan = steady.get(request.name)
                try:
                    if plan is None:
                        with conn.begin_nested():
                            plan = subscription.plan_batch(
                                conn,
                                request.name,
                                w.topics,
                                config.subscription_position.value,
                                epoch=request.epoch,
                                spark_start=spark_start,
                                spark_end=spark_end,
                                ends=request.ends,
                                ack_on_plan=request.ack_on_plan,
                                owner=request.owner,
                            )
                except SparkfnError as exc:
                    refused.append((w, exc))
                    continue
                names = {t.id: t for t in w.topics}
                spans = {
                    offset_key(names[s.topic_id], s.partition): (s.start, s.end)
                    for s in plan.spans
                    if s.end > s.start
                }
                ranges = split_ranges(
                    w.topics,
                    spans,
                    max_per_task=self.max_per_task,
                    live=w.live,
                    assignment=config.subscription_type.value,
                )
                if final:
                    # Markers only, or (a batch run again after its stop was asked, whose
                    # plan read data) that data first, then each instance's marker.
                    markers: list[InputPartition] = [FinalMarker(i) for i in w.live]
                    ranges = (
                        with_final(ranges, w.live, config.subscription_type.value)
                        if ranges
                        else markers
                    )
                elif ranges and config.subscription_type.value == "key_shared":
                    ranges = by_instance(ranges, w.live)
                tick = end.get(extras.TICK_PREFIX + cid, 0) > start.get(extras.TICK_PREFIX + cid, 0)
                if tick and not final:  # its windows look at the clock in each live instance
                    ranges = [*ranges, *(TickMarker(i) for i in w.live)]
                items += [(w, r) for r in ranges]
        for w, error in refused:
            self._refuse(w, error)
        alone = frozenset(suspects.take_isolation(self.data_dir, self.group))
        tasks = pack(items, self.slots, self.group, self.member_seconds, alone)
        if alone:
            suspects.record_isolation(
                self.data_dir,
                self.group,
                {
                    i: t.slices[0].control_id
                    for i, t in enumerate(tasks)
                    if t.slices[0].control_id in alone
                },
            )
        return list(tasks)

    def _refuse(self, work: MemberWork, exc: Exception) -> None:
        """A member whose plan the store refused (another run owns its subscription, a newer
        epoch reads it) dies with that cause; its supervisor's policy decides."""
        _LOG.error("group %s: member %s refused: %s", self.group, work.member.control_id, exc)
        cause = DeathCause.from_exception(exc, "failure", "group reader")
        control.record_death(
            self._store(),
            work.member.control_id,
            work.live[0],
            cause,
            fatal=False,
            epoch=work.member.epoch,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Runs on an executor: every slice of the task, one payload row out."""
        from sparkfn.runtime.group.task import run_group_task  # executors only

        if not isinstance(partition, GroupTask):
            msg = f"{GROUP_FORMAT} reader got a foreign partition {partition!r}"
            raise TypeError(msg)
        return freeze_imports(run_group_task(self.store_url, self.data_dir, partition))

    def commit(self, end: dict[str, int]) -> None:
        """Spark finished up to ``end``; each member's cursors moved in its own commit."""


class GroupDataSource(DataSource):
    """``format("sparkfn-group")``: the source of a query group (options ``group``,
    ``storeUrl``, ``dataDir``, ``taskSlots``, ``memberBudget``, ``memberSeconds``)."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return GROUP_FORMAT

    def schema(self) -> str:
        """One row per task: the pickled results of its slices."""
        return GROUP_SCHEMA

    def streamReader(self, schema: StructType) -> GroupStreamReader:  # noqa: N802
        """Called once on the driver per query start."""
        return GroupStreamReader({k.lower(): v for k, v in self.options.items()})
