"""What some members ask of their group's reader beyond their inputs' data.

The group's reader (:mod:`.reader`) plans every member the same way; a few
members' configs, or the start of a group of one (:mod:`.solo`), ask for
more, and each is kept here so the reader stays one loop:

* a ``topics_pattern``: the member reads the topics its pattern matches now,
  and those created while it runs from their first message, as Pulsar's
  pattern consumers find them (:class:`PatternInputs`);
* a window that fires on the clock (``windowConfig`` with a time length):
  a batch runs at least every tick, input or not, with a tick marker per live
  instance (:func:`tick_due`; the offsets key ``__tick__/<control id>``);
* a byte budget (``max_bytes_per_batch``, or the reader's ``memberBytes``):
  the member's rows in a batch are capped by their mean stored size too;
* a run that parks (reader option ``parking``, a group of one whose
  supervisor parks its query when its input is quiet,
  :mod:`sparkfn.runtime.lifecycle.parking`): each plan reads the run's state
  in its transaction (on PostgreSQL locking its row), so parking, which
  checks that no batch is planned, and planning, which plans nothing for a
  parked run, are ordered (:func:`parked`);
* a probe (reader option ``probes``, a poison hunt of the member's supervisor,
  :mod:`sparkfn.runtime.lifecycle.poison`): the member's batches read no
  further than the probe's ends, and only those partitions, until its
  cursors reach them; ``exitNotes`` names the file where the daemon writes
  the exit status of a Python worker that dies under the member's slice.

One rule applies to the group as a whole: a batch's start waits, after the
last batch's, for a time that grows with how many members had work in it
(reader option ``spacing``, :class:`BatchSpacing`).

One step applies to every member: the instances that take input are read
again in the transaction that records the plans, so an instance that began
to stop alone since :meth:`~.reader.GroupStreamReader.latestOffset` gets
nothing of the batch (:func:`narrow_live`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from sqlalchemy import Connection, select

from sparkfn.api.errors import ConfigError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group.plan import MemberWork
from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.discovery import TopicDiscovery
from sparkfn.topics.log import mean_stored_size
from sparkfn.topics.spark.planning import ends_stream, offset_key, record_budget

TICK_PREFIX = "__tick__/"


class PatternInputs:
    """The topics each pattern member reads, kept across the reader's triggers."""

    def __init__(self, store_url: str, data_dir: str) -> None:
        self.store_url = store_url
        self.data_dir = data_dir
        self._found: dict[str, tuple[str, TopicDiscovery, list[TopicInfo]]] = {}

    def topics(self, control_id: str, config: FunctionConfig) -> list[TopicInfo]:
        """The topics ``config.topics_pattern`` matches, those gained since adopted by its
        subscription from their first message (see :mod:`sparkfn.topics.discovery`)."""
        pattern = config.topics_pattern or ""
        entry = self._found.get(control_id)
        if entry is None or entry[0] != pattern:
            discovery = TopicDiscovery(self.store_url, self.data_dir, pattern)
            entry = (pattern, discovery, discovery.adopt([], config.subscription))
        elif entry[1].due():
            added = entry[1].adopt(entry[2], config.subscription)
            entry = (pattern, entry[1], [*entry[2], *added])
        self._found[control_id] = entry
        return entry[2]

    def forget(self, keep: set[str]) -> None:
        """Drop what is kept for members no longer in the group."""
        for cid in set(self._found) - keep:
            del self._found[cid]


def parked(conn: Connection, control_ids: list[str]) -> set[str]:
    """Those of ``control_ids`` whose run is parked, read in the caller's transaction (their
    rows locked on PostgreSQL, in control id order)."""
    if not control_ids:
        return set()
    runs = control.runs
    query = (
        select(runs.c.fqfn, runs.c.state)
        .where(runs.c.fqfn.in_(sorted(control_ids)))
        .order_by(runs.c.fqfn)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return {r.fqfn for r in conn.execute(query) if r.state == control.PARKED}


def narrow_live(conn: Connection, work: Mapping[str, MemberWork]) -> set[str]:
    """Narrow each member's ``live`` to the instances its run's record says take input,
    read in the caller's transaction, the one that records the batch's plans (locked on
    PostgreSQL); returns the members left with none (their data waits in their cursors).

    :meth:`~.reader.GroupStreamReader.latestOffset` read the records before Spark
    logged the batch's offsets. An instance's drain or suspend records it
    ``STOPPING``, then waits for the plan recorded last, then closes its objects
    and records it ``STOPPED``. A plan recorded after that read must therefore
    deal it nothing: its task could reach the instance once its objects are
    closed and it is reported ``STOPPED``. The order of the two transactions
    (SQLite's write lock, PostgreSQL's row locks) makes one see the other. An
    end-of-stream batch left with none is not planned either: its markers would
    reach objects closed already, or make new ones after the close. The run's
    stop does not wait for it
    (:meth:`~sparkfn.runtime.lifecycle.query_target.QueryTarget.stopped`: no
    instance takes input and the batch planned last committed).
    """
    records = control.read_controls(conn, list(work), lock=True)
    empty: set[str] = set()
    for cid, w in work.items():
        record = records.get(cid)
        now = set(record.live(w.member.config.parallelism)) if record is not None else set()
        w.live = [i for i in w.live if i in now]
        if not w.live:
            empty.add(cid)
    return empty


def tick_ms(config: FunctionConfig) -> int | None:
    """How often the member's windows look at the clock (None: they do not)."""
    window = config.window_config
    return window.ticks_ms if window is not None else None


def tick_due(config: FunctionConfig, control_id: str, start: Mapping[str, int]) -> int | None:
    """The member's clock tick now, if it is past the one ``start`` records."""
    every = tick_ms(config)
    if every is None:
        return None
    tick = int(time.time() * 1000) // every
    return tick if tick > start.get(TICK_PREFIX + control_id, 0) else None


def probe_ends(
    probes: Mapping[str, list[list[int]]], control_id: str, topics: list[TopicInfo]
) -> dict[str, int] | None:
    """The member's probe as offsets keys, or None without one."""
    found = probes.get(control_id)
    if found is None:
        return None
    names = {t.id: t for t in topics}
    return {offset_key(names[tid], part): int(end) for tid, part, end in found if tid in names}


def parse_probes(text: str | None) -> dict[str, list[list[int]]]:
    """Reader option ``probes``: ``{control id: [[topic id, partition, end], ...]}``."""
    if not text:
        return {}
    try:
        found = json.loads(text)
        return {str(cid): [[int(x) for x in e] for e in ends] for cid, ends in found.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        msg = f"sparkfn-group data source: option 'probes' {text!r} is not a probe per member"
        raise ConfigError(msg) from exc


def parse_notes(text: str | None) -> dict[str, str]:
    """Reader option ``exitNotes``: ``{control id: file}``."""
    if not text:
        return {}
    try:
        return {str(k): str(v) for k, v in json.loads(text).items()}
    except (ValueError, TypeError, AttributeError) as exc:
        msg = f"sparkfn-group data source: option 'exitNotes' {text!r} is not a file per member"
        raise ConfigError(msg) from exc


def row_budget(
    store: Store,
    config: FunctionConfig,
    topics: list[TopicInfo],
    lows: dict[str, int],
    rows: int | None,
    max_bytes: int | None,
) -> int | None:
    """A member's row budget for a batch starting at ``lows``: its records cap (else
    ``rows``), and its bytes cap (else ``max_bytes``) over the mean stored size of the
    records next in line."""
    rows = config.max_records_per_batch or rows
    max_bytes = config.max_bytes_per_batch or max_bytes
    if max_bytes is None:
        return rows
    keys = [(t, p, offset_key(t, p)) for t in topics for p in range(t.partitions)]
    with store.read() as conn:
        size = mean_stored_size(conn, [(t, p, lows[k]) for t, p, k in keys if k in lows])
    return record_budget(rows, max_bytes, size)


def ends_drain(work: MemberWork, max_per_task: int | None, slots: int) -> bool:
    """Whether a drain's batch that reaches its target may end the stream itself: when that
    costs no cores (:func:`~sparkfn.topics.spark.planning.ends_stream`); it saves the
    end-of-stream batch's trigger. Not for a member that negative-acks with a bound on its
    redeliveries: a message of that batch may fail and be delivered again, in this drain,
    after it. Without a bound (Pulsar's default) a drain leaves the retry topic for the
    next run (:meth:`~.retries.RetryAdmission.drain_ends`), so its last data batch may end
    the stream: its instances are not made again elsewhere only for their end-of-stream."""
    config = work.member.config
    if config.negative_acks and config.max_message_retries is not None:
        return False
    return ends_stream(
        work.topics,
        {k: (work.base.get(k, 0), hi) for k, hi in work.ends.items()},
        work.live,
        max_per_task=max_per_task,
        assignment=work.member.config.subscription_type.value,
        slots=slots,
    )


# Members with work in a batch at which the next batch waits the whole spacing.
FULL_WIDTH = 20


class BatchSpacing:
    """The least time between two of a shared group's batches' starts, by the last batch's width.

    A batch has a fixed cost (Spark's micro-batch in the JVM, the source's plan, a task's start,
    the commit) whatever its members; under steady input from many members, batches that
    start back to back pay it more often for the same messages (200 functions x 5 msg/s: 110 %
    of a core with a batch every 0.2 s, 82 % with one every 0.3 s, the same p50). A batch with
    one or two members waits next to nothing, so a function alone keeps its latency: the wait
    is ``spacing`` x min(1, width / :data:`FULL_WIDTH`), after the last batch's start.
    """

    def __init__(self, spacing: float) -> None:
        self.spacing = spacing
        self._last: float | None = None  # when the last batch with work was planned
        self._width = 0  # how many members had work in it

    def due_in(self, now: float) -> float:
        """Seconds until the next batch may start (0: now)."""
        if self._last is None or self.spacing <= 0:
            return 0.0
        gap = self.spacing * min(1.0, self._width / FULL_WIDTH)
        return max(0.0, self._last + gap - now)

    def wait(self) -> None:
        """Sleep until the next batch may start."""
        pause = self.due_in(time.monotonic())
        if pause > 0:
            time.sleep(pause)

    def started(self, width: int) -> None:
        """A batch with ``width`` members' work was planned now."""
        self._last, self._width = time.monotonic(), width
