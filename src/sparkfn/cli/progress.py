"""The progress of a function's or sink's query run, shown on stderr while it runs.

On a terminal, a table of per-instance counts is redrawn in place; elsewhere
(a log file, a pipe) a line of totals is written every few seconds while they
change. The counts are this run's: a function's statistics are kept in the
store across runs, so what earlier runs counted (the status when this run
started) is taken off, and the totals of every run are shown beside them,
labelled so, once earlier runs counted anything. The run's last words name
the topic that holds its failed messages. ``sinks localrun`` shows the same
table (``PROCESSED`` counts records written).
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sparkfn.cli.context import note
from sparkfn.cli.params import elapsed

if TYPE_CHECKING:
    from sparkfn.api.status import FunctionStatus
    from sparkfn.config.function import FunctionConfig

# What a status or stats table shows of each instance, in this order.
COUNT_COLUMNS = (
    "RECEIVED",
    "PROCESSED",
    "USER EXC",
    "SYSTEM EXC",
    "DEAD-LETTERED",
    "AVG LATENCY",
)
# How often the live table is refreshed (and the query polled), in seconds.
REFRESH_SECONDS = 1.0
# How often a plain progress line may be printed when stderr is not a terminal.
PROGRESS_SECONDS = 5.0


class Display(Protocol):
    """Progress on stderr while a run goes."""

    def update(self, status: FunctionStatus) -> None:
        """Show the status now (or when it is time to)."""

    def close(self, status: FunctionStatus | None) -> None:
        """Show the final status, if given, and finish; later calls do nothing."""

    def log(self, line: str) -> None:
        """Show one line the function logged, as it is."""


def progress_display(
    console: Console, config: FunctionConfig, since: FunctionStatus | None = None
) -> Display:
    """Per-instance counts of a query run: a live table on a terminal, else progress lines.

    ``since`` is the status when the run started: what earlier runs counted.
    """
    started = time.monotonic()
    if console.is_terminal:
        return _LiveTable(console, config, started, since)
    return _ProgressLines(config, started, since)


def this_run(status: FunctionStatus, since: FunctionStatus | None) -> FunctionStatus:
    """``status`` less what ``since`` counted: each instance's counts of this run alone."""
    if since is None:
        return status
    before = {i.instance_id: i.status for i in since.instances}
    instances = []
    for instance in status.instances:
        now, then = instance.status, before.get(instance.instance_id)
        if then is None:
            instances.append(instance)
            continue
        processed = now.num_successfully_processed - then.num_successfully_processed
        latency_sum = (
            now.average_latency * now.num_successfully_processed
            - then.average_latency * then.num_successfully_processed
        )
        counts = {
            "num_received": now.num_received - then.num_received,
            "num_successfully_processed": processed,
            "num_user_exceptions": now.num_user_exceptions - then.num_user_exceptions,
            "num_system_exceptions": now.num_system_exceptions - then.num_system_exceptions,
            "num_dead_lettered": now.num_dead_lettered - then.num_dead_lettered,
            "average_latency": max(latency_sum / processed, 0.0) if processed > 0 else 0.0,
        }
        instances.append(instance.model_copy(update={"status": now.model_copy(update=counts)}))
    return status.model_copy(update={"instances": instances})


def _earlier_totals(status: FunctionStatus, since: FunctionStatus | None) -> str:
    """``totals of every run: ...`` once earlier runs counted anything, else ``""``."""
    if since is None or not any(_totals(since)):
        return ""
    received, processed, user, system, dead = _totals(status)
    return (
        f"totals of every run: received {received}, processed {processed}, "
        f"user exceptions {user}, system exceptions {system}, dead-lettered {dead}"
    )


def _last_invocation(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S")


class _LiveTable:
    """Per-instance counts in a table redrawn in place on a terminal."""

    def __init__(
        self,
        console: Console,
        config: FunctionConfig,
        started: float,
        since: FunctionStatus | None,
    ) -> None:
        self.config = config
        self.started = started
        self.since = since
        self.live = Live(console=console, auto_refresh=False, transient=False)
        self.live.start()

    def update(self, status: FunctionStatus) -> None:
        self.live.update(self._table(status), refresh=True)

    def log(self, line: str) -> None:
        if self.live.is_started:  # above the table, which stays at the bottom
            self.live.console.print(Text(line), soft_wrap=True, highlight=False)
        else:
            note(line)

    def close(self, status: FunctionStatus | None) -> None:
        if not self.live.is_started:
            return
        if status is not None:
            self.update(status)
        self.live.stop()
        if status is not None:
            note_dead_letters(self.config, this_run(status, self.since))

    def _table(self, status: FunctionStatus) -> Table:
        cfg = self.config
        table = status_table(
            this_run(status, self.since),
            f"{cfg.fqfn}  {', '.join(cfg.inputs) or '-'} -> {cfg.output or '-'}  "
            f"up {elapsed(self.started)}  (counts of this run)",
        )
        table.caption = _earlier_totals(status, self.since) or None
        table.caption_justify = "left"
        return table


def status_table(status: FunctionStatus, title: str) -> Table:
    """Each instance's counts in a table (``localrun``'s progress, ``functions status``)."""
    table = Table(
        "INSTANCE", "STATE", *COUNT_COLUMNS, "LAST INVOCATION", title=title, title_justify="left"
    )
    for instance in status.instances:
        s = instance.status
        table.add_row(
            str(instance.instance_id),
            s.state.value,
            str(s.num_received),
            str(s.num_successfully_processed),
            str(s.num_user_exceptions),
            str(s.num_system_exceptions),
            str(s.num_dead_lettered),
            f"{s.average_latency:.3f} ms",
            _last_invocation(s.last_invocation_time),
        )
    return table


class _ProgressLines:
    """One line of totals every few seconds while they change, for logs and pipes."""

    def __init__(
        self, config: FunctionConfig, started: float, since: FunctionStatus | None
    ) -> None:
        self.config = config
        self.started = started
        self.since = since
        self.last_line_at = 0.0
        self.last_counts: tuple[int, ...] = ()
        self.closed = False

    def update(self, status: FunctionStatus) -> None:
        now = time.monotonic()
        if now - self.last_line_at < PROGRESS_SECONDS:
            return
        counts = _totals(status)
        if counts != self.last_counts:
            self._print(status, counts)
        self.last_line_at = now

    def log(self, line: str) -> None:
        note(line)

    def close(self, status: FunctionStatus | None) -> None:
        if status is not None and not self.closed:
            self._print(status, _totals(status))
            note_dead_letters(self.config, this_run(status, self.since))
        self.closed = True

    def _print(self, status: FunctionStatus, counts: tuple[int, ...]) -> None:
        """This run's counts in one line, then the totals of every run if earlier ones counted."""
        self.last_counts = counts
        ours = this_run(status, self.since)
        received, processed, user, system, dead = _totals(ours)
        states = sorted({i.status.state.value for i in status.instances})
        # Each instance's average is over its successfully processed messages.
        latency_sum = sum(
            i.status.average_latency * i.status.num_successfully_processed for i in ours.instances
        )
        latency = latency_sum / processed if processed else 0.0
        totals = _earlier_totals(status, self.since)
        sys.stderr.write(
            f"[{elapsed(self.started)}] {self.config.fqfn} {'/'.join(states)}: "
            f"received {received}, processed {processed}, user exceptions {user}, "
            f"system exceptions {system}, dead-lettered {dead}, avg latency {latency:.3f} ms"
            + (f" (this run; {totals})" if totals else "")
            + "\n"
        )
        sys.stderr.flush()


def note_dead_letters(config: FunctionConfig, status: FunctionStatus) -> None:
    """The run's last words on failed messages: which topic holds them."""
    totals = _totals(status)
    target = config.dead_letter_target
    if totals[4] and target is not None:
        sys.stderr.write(f"{totals[4]} failed message(s) are in topic {target}\n")
    if totals[2] and config.negative_acks and config.max_message_retries is None:
        sys.stderr.write(
            f"failed messages wait in topic {config.retry_topic} to be delivered again "
            "(max_message_retries unset: without end), also when the function runs again\n"
        )
    sys.stderr.flush()


def _totals(status: FunctionStatus) -> tuple[int, ...]:
    instances = [i.status for i in status.instances]
    return (
        sum(s.num_received for s in instances),
        sum(s.num_successfully_processed for s in instances),
        sum(s.num_user_exceptions for s in instances),
        sum(s.num_system_exceptions for s in instances),
        sum(s.num_dead_lettered for s in instances),
    )
