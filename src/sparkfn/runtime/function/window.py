"""Windows of messages for a function with ``window_config`` (Pulsar's ``windowConfig``).

One :class:`WindowRunner` per function instance. Its messages and window
bookkeeping (:class:`Pane`) live in the function's state under
:func:`state_key`, read at the start of a task and written back by each
step, so they commit in the batch's transaction with the windows' outputs:
after a crash the replayed batch starts from the last committed pane and,
under ``effectively_once``, every window is emitted once with exactly its
messages.

* **Count windows** (``windowLengthCount`` N, ``slidingIntervalCount`` S,
  default N): after every S-th message the function gets the last N
  messages (fewer while fewer have arrived).
* **Time windows** (``windowLengthDurationMs`` L, ``slidingIntervalDurationMs``
  S, default L): windows ``(end - L, end]`` whose ends are multiples of S
  since the epoch; one fires when ``end`` is reached (the clock in
  processing time; the watermark in event time) and holds at least one
  message (empty windows are skipped, as Pulsar does).
* **Time length, counted slide** (``windowLengthDurationMs`` L,
  ``slidingIntervalCount`` S): after every S-th message the function gets
  the messages of the last L ms before it, as Pulsar's count trigger over a
  time eviction does.
* **Event time** (``timestampExtractorClassName``): a message's time is what
  the extractor gives; the watermark, as Pulsar's, is the least across the
  input topics of the latest time seen on each, less ``maxLagMs``, and there
  is none until every input topic has given a message; it advances at the
  end of each batch. A message older than the watermark is *late*: it goes
  to ``lateDataTopic`` or, without one, is dropped as Pulsar drops it, and
  never silently: a warning in the function's log and the
  :data:`LATE_DROPPED_METRIC` count say so. A message at the watermark is on
  time; if its window fired already, it joins the first one that has not.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sparkfn.api.window import Window, WindowRecord
from sparkfn.runtime.function.attempts import attempt_each
from sparkfn.runtime.function.emit import Emitted
from sparkfn.runtime.function.rows import (
    DLQ_ATTEMPTS,
    DLQ_EXCEPTION,
    DLQ_ORIGIN_MESSAGE_ID,
    DLQ_REAL_TOPIC,
    InputRows,
)
from sparkfn.runtime.function.window_pane import (
    LATE_DROPPED_METRIC,
    MAX_INSTANCES,
    MESSAGE_EVENT_TIME,
    Held,
    Pane,
    load_extractor,
    state_key,
)
from sparkfn.runtime.stats import ExceptionInfo

__all__ = ["LATE_DROPPED_METRIC", "Pane", "WindowRunner", "load_extractor", "state_key"]

if TYPE_CHECKING:
    from collections.abc import Callable

    from sparkfn.config.window import WindowConfig
    from sparkfn.runtime.function.instance import FunctionInstance


def _ceil_to(value: int, step: int) -> int:
    return -(-value // step) * step


class WindowRunner:
    """Feeds one instance's messages into windows and calls the function per window."""

    def __init__(self, inst: FunctionInstance, window: WindowConfig) -> None:
        self.inst = inst
        self.window = window
        self.key = state_key(inst.instance_id)
        self._extract: Callable[[Any], Any] | None = None
        self._cached: tuple[bytes | None, Pane] | None = None
        # Instance 0 takes over the panes of instances that no longer exist (the
        # parallelism went down) until a look finds none left in committed state.
        self._orphans_checked = inst.instance_id != 0

    # --- the pane, in the task's state ------------------------------------------
    def _pane(self) -> Pane:
        data = self.inst.state.get_state(self.key)
        cached = self._cached
        if cached is not None and cached[0] is data:
            return cached[1]
        pane = Pane.load(data)
        self._cached = (data, pane)
        if not self._orphans_checked:
            self._adopt(pane)
        return pane

    def _adopt(self, pane: Pane) -> None:
        """Take the messages held by instances ``>= parallelism`` into ``pane`` and delete
        their panes, in this task's state: both commit with the batch, so none is lost
        when the parallelism goes down, and none is taken twice."""
        state = self.inst.state
        adopted: list[Held] = []
        for instance_id in range(self.inst.config.parallelism, MAX_INSTANCES):
            key = state_key(instance_id)
            data = state.get_state(key)
            if data is None:
                continue
            adopted.extend(Pane.load(data).held)
            state.delete(key)
        if not adopted:
            self._orphans_checked = True
            return
        window = self.window
        adopted.sort(key=lambda h: h[0])
        if window.kind == "count":
            for held in adopted:  # as if they arrived now, in the order they arrived there
                self._count(pane, held)
        else:
            if pane.done_end is not None:
                # Into the first window not looked at yet: theirs never fired here.
                first = pane.done_end + window.slide - window.length + 1
                adopted = [(max(h[0], first), *h[1:]) for h in adopted]
            pane.held = sorted([*pane.held, *adopted], key=lambda h: h[0])
        self._save(pane)

    def _save(self, pane: Pane) -> None:
        data = pane.dump()
        self.inst.state.put_state(self.key, data)
        self._cached = (self.inst.state.get_state(self.key), pane)

    # --- steps -------------------------------------------------------------------
    def process_rows(self, rows: InputRows) -> None:
        """Take a batch's rows into the pane, firing every window they complete."""
        pane = self._pane()
        window = self.window
        now = int(time.time() * 1000)
        dropped: list[str] = []
        for i in range(rows.n):
            held = self._hold(rows, i, now, pane, dropped)
            if held is None:
                continue
            if window.kind == "count":
                self._count(pane, held)
            elif window.counted_slide:
                self._count_timed(pane, held)
            else:
                pane.held.append(held)
        if dropped:
            self._log_dropped(dropped, pane.watermark)
        if window.event_time:
            mark = self._watermark(pane)
            if mark is not None:
                pane.watermark = max(mark, pane.watermark or mark)
                if not window.counted_slide:
                    self._fire_until(pane, pane.watermark)
        elif window.kind == "time" and not window.counted_slide:
            self._fire_until(pane, int(time.time() * 1000))
        self._save(pane)

    def _watermark(self, pane: Pane) -> int | None:
        """Pulsar's watermark: the least, across the input topics, of the latest time
        seen on each, less ``maxLagMs``; none until every named input has a message
        (the topics of ``topics_pattern`` count once they have given one)."""
        seen = pane.max_seen
        if not seen or any(topic not in seen for topic in self.inst.config.inputs):
            return None
        return min(seen.values()) - self.window.max_lag

    def _count(self, pane: Pane, held: Held) -> None:
        """One more message of a count window; the window fires every slide's worth."""
        window = self.window
        pane.held.append(held)
        del pane.held[: max(0, len(pane.held) - window.length)]
        pane.since_fire += 1
        if pane.since_fire >= window.sliding_count:
            pane.since_fire = 0
            self._fire(list(pane.held), None, None)
            # The next window holds the last length - slide of these at most.
            keep = window.length - window.sliding_count
            del pane.held[: max(0, len(pane.held) - keep)]

    def _count_timed(self, pane: Pane, held: Held) -> None:
        """One more message of a time window slid by count: every slide's worth of
        messages, the function gets those of the last ``length`` ms before the last."""
        window = self.window
        pane.held.append(held)
        pane.since_fire += 1
        end = max(h[0] for h in pane.held)
        pane.held = [h for h in pane.held if h[0] > end - window.length]
        if pane.since_fire >= window.sliding_count:
            pane.since_fire = 0
            self._fire(sorted(pane.held, key=lambda h: h[0]), end - window.length, end)

    def tick(self) -> None:
        """The clock moved (a processing-time window's tick): fire what is due."""
        if self.window.kind != "time" or self.window.event_time or self.window.counted_slide:
            return
        pane = self._pane()
        before = pane.done_end
        self._fire_until(pane, int(time.time() * 1000))
        if pane.done_end != before:
            self._save(pane)

    def _hold(
        self, rows: InputRows, i: int, now: int, pane: Pane, dropped: list[str]
    ) -> Held | None:
        """Row ``i`` as a held message with its time; ``None`` when it failed or is late
        (the ids of late messages dropped are added to ``dropped``)."""
        window = self.window
        event = rows.column("event_time")[i]
        event_ms = None if event is None else int(event.timestamp() * 1000)
        stamp = now
        if window.event_time:
            stamp_or_error = self._timestamp(rows, i, event_ms)
            if isinstance(stamp_or_error, Exception):
                self._dead_letter_row(rows, i, stamp_or_error)
                return None
            stamp = stamp_or_error
        topic = rows.column("topic")[i] or ""
        held: Held = (
            stamp,
            rows.values[i],
            rows.column("key")[i],
            tuple(rows.column("properties")[i] or ()),
            event_ms,
            topic,
            rows.message_id(i),
        )
        if window.event_time:
            if pane.watermark is not None and stamp < pane.watermark:  # late, as in Pulsar
                if not self._late_message(held):
                    dropped.append(held[6])
                return None
            seen = pane.max_seen.get(topic)
            pane.max_seen[topic] = stamp if seen is None else max(seen, stamp)
        if window.kind == "time" and pane.done_end is not None:
            # The clock went back, or (event time) a message at the watermark whose
            # window fired: it joins the first window not looked at yet.
            held = (max(stamp, pane.done_end + window.slide - window.length + 1), *held[1:])
        return held

    def _timestamp(self, rows: InputRows, i: int, event_ms: int | None) -> int | Exception:
        """Row ``i``'s event time from the extractor, or why it has none."""
        inst = self.inst
        if self._extract is None:
            self._extract = load_extractor(self.inst.config)
        error: Exception | None = None
        for _ in range(inst.config.attempts_in_place):
            try:
                if self._extract is MESSAGE_EVENT_TIME:
                    if event_ms is None:
                        msg = "the message has no event time (MessageEventTime needs one)"
                        raise ValueError(msg)
                    return event_ms
                topic = rows.column("topic")[i]
                value = inst.serdes.input_for(topic).decode(rows.values[i])
                stamp = self._extract(value)
                if isinstance(stamp, bool) or not isinstance(stamp, int):
                    msg = (
                        f"the timestamp extractor returned {stamp!r}, not ms since the epoch (int)"
                    )
                    raise TypeError(msg)
                return stamp
            except Exception as exc:  # noqa: BLE001 - the message fails, as in process()
                inst.stats.record_exception(
                    ExceptionInfo.from_exception("user", exc, rows.message_id(i))
                )
                error = exc
        assert error is not None
        return error

    # --- windows -------------------------------------------------------------------
    def _fire_until(self, pane: Pane, limit: int) -> None:
        """Fire every time window ending at or before ``limit``; drop what no later one holds."""
        window = self.window
        length, slide = window.length, window.slide
        while pane.held:
            # The first window holding a message, after those looked at already
            # (windows no message is in are skipped).
            end = _ceil_to(min(h[0] for h in pane.held), slide)
            if pane.done_end is not None:
                end = max(end, pane.done_end + slide)
            if end > limit:
                return
            members = [h for h in pane.held if end - length < h[0] <= end]
            if members:
                self._fire(members, end - length, end)
            pane.done_end = end
            horizon = end + slide - length  # later windows hold only messages after it
            pane.held = [h for h in pane.held if h[0] > horizon]

    def _fire(self, held: list[Held], start: int | None, end: int | None) -> None:
        """Call the function with one window; its result goes out as a message's does."""
        inst = self.inst
        records = [self._record(h) for h in held]
        inst.context.bind(None, -1)
        output = inst.config.output
        failed = attempt_each(
            inst, [Window(records, start, end)], [None], [None], None if output else _discard
        )
        if failed:
            for h in held:
                self._dead_letter(h, failed[0][1])

    def _record(self, held: Held) -> WindowRecord:
        stamp, raw, key, props, event_ms, topic, message_id = held
        value = self.inst.serdes.input_for(topic).decode(raw)
        return WindowRecord(
            value, key, dict(props), event_ms, stamp, f"persistent://{topic}", message_id
        )

    # --- messages that leave the window ----------------------------------------------
    def _late_message(self, held: Held) -> bool:
        """A late message to the late-data topic; ``False``: there is none, so it is
        dropped, as Pulsar drops it (counted in :data:`LATE_DROPPED_METRIC`)."""
        target = self.inst.config.late_data_target
        if target is None:
            self.inst.stats.record_metric(LATE_DROPPED_METRIC, 1)
            return False
        _, raw, key, props, event_ms, topic, message_id = held
        properties = {**dict(props), "ORIGIN_MESSAGE_ID": message_id}
        properties["REAL_TOPIC"] = f"persistent://{topic}"
        self.inst.out.append(Emitted("late", target, raw, key, properties, _when(event_ms)))
        return True

    def _log_dropped(self, ids: list[str], watermark: int | None) -> None:
        """One warning in the function's log for the late messages a batch dropped."""
        shown = ", ".join(ids[:10]) + (", ..." if len(ids) > 10 else "")
        self.inst.context.get_logger().warning(
            "%d late message(s) dropped, older than the watermark %s (no lateDataTopic "
            "to send them to): %s",
            len(ids),
            watermark,
            shown,
        )

    def _dead_letter(self, held: Held, exc: Exception) -> None:
        dlq = self.inst.config.dead_letter_target
        if dlq is None:
            return
        _, raw, key, props, event_ms, topic, message_id = held
        properties = dict(props)
        properties.update(
            {
                DLQ_ORIGIN_MESSAGE_ID: message_id,
                DLQ_REAL_TOPIC: f"persistent://{topic}",
                DLQ_EXCEPTION: f"{type(exc).__name__}: {exc}",
                DLQ_ATTEMPTS: str(self.inst.config.attempts_in_place),
            }
        )
        self.inst.out.append(Emitted("dead_letter", dlq, raw, key, properties, _when(event_ms)))
        self.inst.stats.dead_lettered += 1

    def _dead_letter_row(self, rows: InputRows, i: int, exc: Exception) -> None:
        dlq = self.inst.config.dead_letter_target
        if dlq is None:
            return
        self.inst.out.append(rows.dead_letter(i, dlq, exc, self.inst.config.attempts_in_place))
        self.inst.stats.dead_lettered += 1


def _when(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def _discard(result: Any, key: str | None) -> None:
    """No output topic: what the function returns goes nowhere."""
