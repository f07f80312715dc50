"""Finding the message that kills its Python worker, and passing it (issue 28, point 5).

A message on which the user's code ends its process (``os._exit``, a
segfault, the OOM killer) fails its whole batch: no ``except`` reaches it,
so it cannot be dead-lettered like a message that raises. Started again,
the query would run the same batch and fail the same way until the failure
policy gives up. Instead, when a function's query fails because a task's
Python worker died (:func:`worker_crashed`), its supervisor hunts for the
message before it applies the failure policy:

1. The failed batch is the subscription's uncommitted plan
   (:func:`sparkfn.topics.subscription.read_plan`): its messages, in the
   order of its spans, of which the first ``bad`` (at first all) are known
   to crash a batch (:class:`Hunt`).
2. The query is started again (a new epoch, the objects closed as after any
   failure) as a **probe**: its reader reads only the first half of those
   ``bad`` messages (the group reader's option ``probes``,
   :mod:`sparkfn.runtime.group.extras`), then goes on as usual.
   If the probe's batch commits, those messages were good and are done,
   exactly once, by the usual commit; when the query then fails again, the
   message is among the rest. If the probe's batch crashes, it is in that
   half. Either way ``bad`` halves.
3. When one message crashes a batch of its own (run alone, so its worker's
   exit status is known: :func:`sparkfn.runtime.spark.daemon.note_exit_to`), it
   is dead-lettered with the cause ("Python worker exited with code 3 while
   processing message 0:17 of public/default/in") in one transaction that
   moves the cursor past it only if it is still there, and counts it as a
   system exception (:func:`sparkfn.runtime.lifecycle.deadletter.dead_letter_input`).
   The query starts again as usual, and the function stays ``RUNNING``.

A drain's final batch (the one that carries its end-of-stream markers) is
hunted the same way. Spark replays a failed batch with the offsets it
planned, marker included; so each start again asks for a new end-of-stream
batch (:func:`~sparkfn.runtime.lifecycle.control.renew_final`), the replay
ends nothing, and the reader reads on to the drain's target, then ends the
stream: the drain ends ``STOPPED`` only with every message before its
target processed or passed.

The hunt gives up, and the failure policy applies as before, when:

* the failure is not a worker's crash, or the batch is not a function's
  data batch whose input can be read again (``at_most_once`` acked it at
  planning);
* it takes more than ``ceil(log2(n)) + EXTRA_PROBES`` probes for a batch of
  ``n`` messages (the crash does not follow one message);
* the message found is the first the function would have processed
  successfully since it began, or since the last message it dead-lettered
  so: a function that crashes on every message would otherwise lose them
  all to its dead-letter topic, one at a time. It cannot be told apart from
  a crash that is not the message's doing (its code or its environment);
* the same cursors failed the last hunt (the policy's restart failed where
  the hunt gave up).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sparkfn.config.function import FunctionConfig, ProcessingGuarantee
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.deadletter import dead_letter_input
from sparkfn.runtime.lifecycle.halving import Hunt, describe_exit, worker_crashed
from sparkfn.runtime.metrics_store import instance_totals
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.spark.planning import FINAL_KEY
from sparkfn.topics.subscription import PartitionKey

_LOG = logging.getLogger("sparkfn.supervisor")

# How long the supervisor waits for the daemon to write a dead worker's exit status.
EXIT_STATUS_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class Probe:
    """A start of the query that reads no further than ``ends`` (``(topic id, partition, end)``)."""

    ends: tuple[tuple[int, int, int], ...]
    exit_file: Path  # where the daemon writes the exit status of a worker that dies in it

    def option(self) -> str:
        """The probe's ends as JSON ``[[topic id, partition, end], ...]``."""
        return json.dumps([list(e) for e in self.ends])


@dataclass
class PoisonHunter:
    """A function's hunts, across the restarts of its query; used by its supervisor's thread.

    The supervisor calls :meth:`after_crash` when its query failed, and the
    query's start (``start_query``) takes the probe to run with
    :meth:`take_probe`.
    """

    store: Store
    config: FunctionConfig
    control_id: str
    hunt: Hunt | None = None
    armed: Probe | None = None
    gave_up_at: dict[PartitionKey, int] | None = None
    processed_mark: int = 0  # processed successfully when it last dead-lettered a message
    said: str | None = None  # the last crash in sparkfn's words (see explained)
    _last: Probe | None = field(default=None, repr=False)

    def take_probe(self) -> Probe:
        """What the next start of the query runs: the armed probe (once), else a start as
        usual (no ends) whose dead worker's exit status is written all the same."""
        probe, self.armed = self.armed, None
        if probe is None:
            probe = Probe((), self._exit_file())
        if self._last is not probe:
            _forget(self._last)
        self._last = probe
        return probe

    def explained(self, error: str) -> str:
        """``error`` led by what the last crash said (its worker's exit status), when it is
        that crash: :func:`~.causes.short_error` tells the user that line, not Spark's."""
        if self.said is None or not worker_crashed(error):
            return error
        return f"{self.said}\n{error}"

    def after_crash(self, error: str, epoch: int) -> str | None:
        """The query of run ``epoch`` failed with ``error``: what to start it again for
        (a probe is armed, or a message was dead-lettered), or ``None``: the failure policy."""
        last, self._last = self._last, None
        self.said = None
        if not worker_crashed(error):
            _forget(last)
            self.hunt = None
            return None
        status = self._exit_status(last) if last is not None else None
        self.said = (
            f"Python worker {describe_exit(status)} while processing a message of "
            f"function {self.config.fqfn}"
        )
        with self.store.read() as conn:
            cursors = subscription.cursors(conn, self.config.subscription)
            plan = subscription.read_plan(conn, self.config.subscription)
        if cursors == self.gave_up_at:
            return None
        hunt = self.hunt
        if hunt is None or hunt.passed(cursors):
            hunt = self.hunt = self._begin(plan, cursors, epoch)
            if hunt is None:
                return None
        else:
            hunt.crashed(cursors)
        if hunt.found and last is not None:
            return self._again(plan, self._pass(hunt, status, epoch, cursors))
        if hunt.exhausted:
            return self._give_up(cursors, f"{hunt.probes} probes did not single out a message")
        self._again(plan, "probe")
        ends = hunt.next_probe()
        probe = Probe(
            tuple((tid, part, end) for (tid, part), end in sorted(ends.items())),
            self._exit_file(),
        )
        self.armed = probe
        return (
            f"a Python worker died under a batch (no. {hunt.crashes} of this hunt); "
            f"probing {hunt.probe} of its {hunt.bad} suspect messages "
            f"(probe {hunt.probes} of at most {hunt.budget})"
        )

    def _begin(
        self,
        plan: subscription.Plan | None,
        cursors: Mapping[PartitionKey, int],
        epoch: int,
    ) -> Hunt | None:
        """A hunt of the failed batch, if it is one the hunt can split."""
        if (
            self.config.processing_guarantees is ProcessingGuarantee.AT_MOST_ONCE
            or plan is None
            or plan.committed
            or plan.acked
            or plan.epoch != epoch
        ):
            return None
        spans = [s for s in plan.spans if s.end > s.start]
        if not spans or any(cursors.get(s.key) != s.start for s in spans):
            return None
        return Hunt.begin(spans)

    def _pass(
        self,
        hunt: Hunt,
        status: int | None,
        epoch: int,
        cursors: Mapping[PartitionKey, int],
    ) -> str | None:
        """Dead-letter the message found, unless nothing shows that the function works."""
        self.hunt = None
        (topic_id, partition), offset = hunt.culprit()
        processed = self._processed()
        if processed <= self.processed_mark:
            return self._give_up(
                cursors,
                f"message {partition}:{offset} crashes alone, but no message was processed "
                "since the function began or last passed one: the crash may not be its",
            )
        topic = next(t for t in TopicAdmin(self.store).list() if t.id == topic_id)
        cause = (
            f"Python worker {describe_exit(status)} while processing message "
            f"{partition}:{offset} of {topic.name}"
        )
        record = control.read_control(self.store, self.control_id)
        live = record.live(self.config.parallelism) if record is not None else [0]
        passed = dead_letter_input(
            self.store,
            self.config,
            control_id=self.control_id,
            epoch=epoch,
            topic=str(topic.name),
            partition=partition,
            offset=offset,
            cause=cause,
            attempts=hunt.crashes,
            instance_id=live[0] if live else 0,
        )
        if not passed:
            return self._give_up(cursors, f"message {partition}:{offset} could not be passed")
        self.processed_mark = processed
        self.gave_up_at = None
        where = "dead-lettered" if self.config.dead_letter_target else "dropped"
        return f"{cause}: {where}; going on with the messages after it"

    def _again(self, plan: subscription.Plan | None, why: str | None) -> str | None:
        """The query starts again for ``why``: if the failed batch ended a drain's stream,
        a new end-of-stream batch is asked for (:func:`~.control.renew_final`). Spark
        replays the failed batch with its old marker; cut short by a probe, or read
        again after a message was passed, it then ends nothing, and the reader reads on
        to the drain's target before it ends the stream: "drained" is never claimed
        with messages left before it."""
        if why is not None and plan is not None and _ends_stream(plan):
            control.renew_final(self.store, self.control_id)
        return why

    def _give_up(self, cursors: Mapping[PartitionKey, int], why: str) -> str | None:
        """No message to pass: the failure policy applies (``None``), here and on a failure at ``cursors``."""
        self.hunt = None
        self.gave_up_at = dict(cursors)
        _LOG.error("function %s: %s; the failure policy applies", self.config.fqfn, why)
        return None

    def _processed(self) -> int:
        totals = instance_totals(self.store, self.control_id)
        return sum(int(t.get("processed_successfully") or 0) for t in totals.values())

    def _exit_file(self) -> Path:
        folder = self.store.data_dir / "probes"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{uuid.uuid4().hex}.exit"

    @staticmethod
    def _exit_status(probe: Probe) -> int | None:
        """The exit status the daemon wrote for a worker that died in ``probe`` (waited for)."""
        deadline = time.monotonic() + EXIT_STATUS_WAIT_SECONDS
        while True:
            try:
                status = int(probe.exit_file.read_text())
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.05)
                continue
            with contextlib.suppress(OSError):
                probe.exit_file.unlink()
            return status


def _forget(probe: Probe | None) -> None:
    """A probe's exit status is not needed (it committed, or the failure is not its)."""
    if probe is not None:
        probe.exit_file.unlink(missing_ok=True)


def _ends_stream(plan: subscription.Plan) -> bool:
    """Whether the batch carried a drain's end-of-stream markers (not split: see the module)."""
    start, end = json.loads(plan.spark_start), json.loads(plan.spark_end)
    # A query of its own counts them under "__final__", a group's per member "__final__/<id>".
    return any(
        int(value) > int(start.get(key, 0))
        for key, value in end.items()
        if key.startswith(FINAL_KEY)
    )
