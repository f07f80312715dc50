"""Running one sink on Spark from this process: :class:`SinkRun`, a :class:`FunctionRun` of a sink.

A sink runs as a function (:mod:`sparkfn.connectors.sink_runtime`), so running one is running
that function's query under the same supervisor, with the sink's own
lifecycle records (``sink:<fqfn>``, see :func:`sparkfn.runtime.lifecycle.control.control_id`).
What a sink adds: :func:`validate_sink` checks its topics and code before
Spark starts, and a failure is a :class:`ConnectorFailedError` naming the
sink.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sparkfn.api.errors import ConnectorFailedError, FunctionFailedError
from sparkfn.config.connector import SinkConfig
from sparkfn.connectors.registry import load_sink
from sparkfn.connectors.sink.sink_config import sink_function_config
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.query.build import check_topics_exist
from sparkfn.store.store import Store
from sparkfn.topics.autocreate import TopicCreation

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def validate_sink(store: Store, sink: SinkConfig, creation: TopicCreation | None = None) -> None:
    """Everything that can be checked before Spark starts, as a :class:`ConfigError`
    naming the sink, the field and the value: the code loads (a built-in
    ``sink_type`` exists; a ``py`` file imports; a ``classname`` names a
    :class:`Sink` class that can be created) and the input topics exist. With
    ``creation`` enabled a missing input is created instead, as a function's
    are; the code is checked first, so a refused sink creates no topic."""
    load_sink(sink)
    inputs = [("inputs", topic) for topic in sink.inputs]
    check_topics_exist(store, f"sink {sink.fqn}", inputs, creation)


class SinkRun(FunctionRun):
    """One sink's query, started and watched from this process: a :class:`FunctionRun` of a sink.

    >>> with SinkRun(SinkConfig.build(name="archive", sink_type="file", inputs=["raw"],
    ...                               configs={"path": "/tmp/out.jsonl"}), store=store) as run:
    ...     run.start(until_drained=True)
    ...     run.wait(timeout=120)            # raises ConnectorFailedError if it died
    ...     run.status().state
    <RunState.STOPPED: 'STOPPED'>

    Stop modes, status, stats (``processed_successfully_total``: records
    written) and transitions are :class:`FunctionRun`'s; ``config`` is the
    sink's function config, ``sink`` the sink's own. Failures are reported
    as :class:`ConnectorFailedError` naming the sink.
    """

    def __init__(
        self,
        sink: SinkConfig,
        *,
        store: Store | None = None,
        data_dir: str | Path | None = None,
        store_url: str | None = None,
        spark_master: str = "local[*]",
        spark: SparkSession | None = None,
    ) -> None:
        self.sink = sink
        super().__init__(
            sink_function_config(sink),
            store=store,
            data_dir=data_dir,
            store_url=store_url,
            spark_master=spark_master,
            spark=spark,
            kind="sink",
        )

    def start(self, *, until_drained: bool = False, checkpoint: Path | None = None) -> SinkRun:
        """Validate (topics, the sink's code) and start; ``until_drained``: write what is there, then stop."""
        try:
            validate_sink(self.store, self.sink)
        except Exception as exc:
            self.record_start_error(exc)
            raise
        try:
            super().start(until_drained=until_drained, checkpoint=checkpoint)
        except FunctionFailedError as exc:
            raise self._failed(exc) from None
        return self

    def _raise_if_failed(self) -> None:
        try:
            super()._raise_if_failed()
        except FunctionFailedError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: FunctionFailedError) -> ConnectorFailedError:
        text = str(exc)
        prefix = f"function {self.config.fqfn}"
        if text.startswith(prefix):
            text = f"sink {self.sink.fqn}" + text[len(prefix) :]
        return ConnectorFailedError(text)
