"""One store append in flight beside the runner's thread, so that the next ``read()`` overlaps it.

A pull source's runner reads a batch, appends it (one store transaction),
acks it, and reads again. Appending and reading take about as long each
(docs/connectors.md has the profiles), so done one after the other a source
moved about half of what its broker's own client moves. :class:`AppendPipe`
runs the append on a thread of its own while the runner's thread calls
``read()`` again; the runner's thread takes the result and acks the batch.

What it keeps: the source is still called by the runner's thread only
(``ack`` and ``commit`` included); appends are made one at a time, in the
order of the reads (a new one starts only after the last one was taken);
a batch is acked only after its transaction committed. So a crash leaves at
most one batch appended and not acked, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from sparkfn.api.connector import Record, Source
from sparkfn.api.errors import SparkfnError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.connector import SourceConfig
from sparkfn.config.function import ProcessingGuarantee
from sparkfn.connectors.appender import TopicAppender

if TYPE_CHECKING:
    from sparkfn.connectors.source.source_context import SourceStats


class AppendPipe:
    """At most one :meth:`TopicAppender.append` running on the pipe's own thread."""

    def __init__(self, appender: TopicAppender, name: str) -> None:
        self.appender = appender
        self.name = name
        self._cond = threading.Condition()
        self._job: tuple[Sequence[Record], Future[list[str | None]]] | None = None
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """Whether a batch was submitted and not yet taken."""
        return self._job is not None

    def submit(self, records: Sequence[Record]) -> None:
        """Start appending ``records``; the last batch must have been taken."""
        if self._job is not None:
            msg = f"{self.name}: an append is still in flight"
            raise RuntimeError(msg)
        future: Future[list[str | None]] = Future()
        with self._cond:
            self._job = (records, future)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def done(self) -> bool:
        """Whether the batch in flight is appended (or failed)."""
        return self._job is not None and self._job[1].done()

    def take(self) -> tuple[Sequence[Record], list[str | None]]:
        """Wait for the batch in flight; its records and message ids, or its append's error."""
        assert self._job is not None
        records, future = self._job
        try:
            return records, future.result()
        finally:
            self._job = None

    def close(self) -> None:
        """Let the pipe's thread end once the batch in flight (if any) is appended."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        started: Future[list[str | None]] | None = None
        while True:
            with self._cond:
                while not self._closed and (self._job is None or self._job[1] is started):
                    self._cond.wait()
                if self._job is None or self._job[1] is started:
                    return
                records, future = self._job
            started = future
            try:
                future.set_result(self.appender.append(records))
            except BaseException as exc:
                future.set_exception(exc)


class Died(Exception):
    """Unwinds the runner's loop once a death is recorded."""


class Appending:
    """The runner's appends and acks (a part of :class:`~.runner_thread.RunnerThread`).

    :meth:`_flush` appends records in transactions of at most ``batch_size``
    and acks each once it committed (``at_most_once``: before it is
    appended). With a pipe (pull sources) the last transaction may still be
    in flight when :meth:`_flush` returns; :meth:`_settle` takes it and acks it.
    """

    config: SourceConfig
    stats: SourceStats
    _guarantee: ProcessingGuarantee
    _lock: threading.Lock
    _death: DeathCause | None
    _pipe: AppendPipe | None
    _in_call: str | None

    @property
    def name(self) -> str:
        """The runner thread's name (the runner's)."""
        raise NotImplementedError

    def _ending(self) -> bool:
        raise NotImplementedError

    def _die(self, exc: BaseException, origin: str, thread: str) -> None:
        raise NotImplementedError

    def _call(self, source: Source, method: str, *args: Any) -> Any:
        raise NotImplementedError

    def _flush(
        self, source: Source, appender: TopicAppender, records: Sequence[Record], wait: bool = True
    ) -> None:
        """Append ``records`` in transactions of at most ``batch_size``; ack and commit each.

        ``wait`` false (the pipe's): the last transaction may be left in flight.
        """
        size = self.config.batch_size
        for start in range(0, len(records), size):
            self._settle(source)
            if self._ending():
                return  # cancel or death: what is not appended is abandoned
            chunk = records[start : start + size]
            if self._guarantee is ProcessingGuarantee.AT_MOST_ONCE:
                self._acknowledge(source, chunk)
            if self._pipe is not None:
                self._pipe.submit(chunk)
                continue
            try:
                ids = appender.append(chunk)
            except Exception as exc:
                raise self._append_failed(exc) from exc
            self._appended(source, chunk, ids)
        if wait:
            self._settle(source)

    def _settle(self, source: Source) -> bool:
        """Wait for the transaction in flight, if any, and ack its records; whether there was one."""
        pipe = self._pipe
        if pipe is None or not pipe.busy:
            return False
        try:
            chunk, ids = pipe.take()
        except Exception as exc:
            raise self._append_failed(exc) from exc
        self._appended(source, chunk, ids)
        return True

    def _append_failed(self, exc: Exception) -> Died:
        """Record the death an append's failure is: a bad record the connector's, else ours."""
        bad_record = isinstance(exc, SparkfnError) and isinstance(exc, ValueError | LookupError)
        self._die(exc, "connector" if bad_record else "failure", self.name)
        return Died()

    def _appended(self, source: Source, chunk: Sequence[Record], ids: list[str | None]) -> None:
        appended = sum(1 for i in ids if i is not None)
        with self._lock:
            self.stats.appended += appended
            self.stats.deduplicated += len(ids) - appended
        if self._death is not None:
            return  # after a death only close() is called
        if self._guarantee is not ProcessingGuarantee.AT_MOST_ONCE:
            self._acknowledge(source, chunk)

    def _call_failed(self, exc: BaseException) -> Died:
        raise NotImplementedError

    def _acknowledge(self, source: Source, records: Sequence[Record]) -> None:
        # _call's rules, once for the batch rather than once per record.
        acked = 0
        ack = source.ack
        self._in_call = "ack"
        try:
            for record in records:
                ack(record)
                acked += 1
        except BaseException as exc:
            raise self._call_failed(exc) from exc
        finally:
            self._in_call = None
            with self._lock:
                self.stats.acked += acked
        self._call(source, "commit")
        with self._lock:
            self.stats.commits += 1
