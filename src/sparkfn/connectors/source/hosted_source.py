"""A source hosted by the worker: a :class:`~sparkfn.connectors.source.source_run.SourceRun` seen as
the worker sees a function's :class:`~sparkfn.runtime.function_run.FunctionRun`.

The worker keeps functions, sinks and sources in one map of runs and drives
them by the same calls: ``start``, ``stop(mode, timeout=...)``, ``wait``,
``stop_instance``, ``restart_instance``, ``status``, ``stats`` and the
``supervisor`` whose ``ended`` says whether the run is over. A source's
instances are threads of the worker process (no Spark); its supervisor is
the one functions run under, so its failure policy, ``SHUTDOWN_WORKER``
included, applies as theirs does.

A source that is not running here (stopped, or never started by this
worker) is still shown: :meth:`HostedSource.status` then reads each
instance's state from the store's lifecycle record.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import delete

from sparkfn.api.errors import ConnectorFailedError, FunctionFailure
from sparkfn.api.lifecycle import RunState, StopMode
from sparkfn.api.status import DeathException, SourceInstanceStatus, SourceStatus
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.catalog import check_configs
from sparkfn.connectors.registry import load_source
from sparkfn.connectors.source.source_context import source_state_dir
from sparkfn.connectors.source.source_run import SourceRun
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.supervisor import Supervisor
from sparkfn.runtime.purge import CONTROL_TABLES
from sparkfn.runtime.query.build import check_topics_exist
from sparkfn.store import schema, signals
from sparkfn.store.store import Store
from sparkfn.topics.autocreate import TopicCreation


def validate_source(
    store: Store, config: SourceConfig, creation: TopicCreation | None = None
) -> None:
    """What a start would refuse, as a :class:`ConfigError` naming the source: code that
    does not load, a built-in's bad configs, an output topic that does not exist. With
    ``creation`` enabled the topic is created instead, as a function's are; the code and
    configs are checked first, so a refused source creates no topic."""
    load_source(config)
    check_configs("source", config.fqn, config.source_type, config.configs)
    check_topics_exist(store, f"source {config.fqn}", [("topicName", config.output)], creation)


class HostedSource:
    """One source's run on the worker (see the module docstring)."""

    def __init__(
        self,
        config: SourceConfig,
        store: Store,
        *,
        on_worker_shutdown: Callable[[FunctionFailure], None] | None = None,
        auto_create_topics: bool = False,
        validated: bool = False,
    ) -> None:
        self.config = config
        self.store = store
        # Checked by validate_source just before (a worker's create or update): not again.
        self._validated = validated
        # Whether a start creates a missing output topic (the store's setting permitting).
        self.auto_create_topics = auto_create_topics
        self.kind = "source"
        self.control_id = control.control_id("source", config.fqn)
        self.run = SourceRun(config, store, on_worker_shutdown=on_worker_shutdown)
        self._started = False

    @property
    def supervisor(self) -> Supervisor | None:
        """The run's supervisor once started, else None (as a FunctionRun's)."""
        return self.run.supervisor if self._started else None

    def start(self) -> HostedSource:
        """Check the output topic, the code and the configs, then start every instance; a
        check that fails is recorded as the source's ``ERROR`` (a restart after the worker's
        shows why it did not start) and raised."""
        try:
            if not self._validated:
                creation = TopicCreation.read(self.store)
                if not self.auto_create_topics:
                    creation = replace(creation, enabled=False)
                validate_source(self.store, self.config, creation)
        except Exception as exc:  # shown as the source's ERROR, as a function's start error is
            control.begin_run(self.store, self.control_id, "source", self.config.parallelism, "")
            ids = [control.FUNCTION, *range(self.config.parallelism)]
            control.set_state(self.store, self.control_id, control.ERROR, str(exc), ids)
            raise
        self._started = True
        self.run.start()
        return self

    def stop(self, mode: str | StopMode = StopMode.CANCEL, *, timeout: float | None = None) -> bool:
        """Stop the run by ``mode``; wait up to ``timeout`` s (0: not at all). True once ended.

        Drain and suspend append what the instances have read and ack it after
        the append commits; cancel abandons what is not appended (not acked, so
        the external system delivers it again).
        """
        if not self._started:
            return True
        self.run.stop(mode)
        return self.run.wait(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run ended; :class:`ConnectorFailedError` if it ended in ERROR."""
        if not self._started:
            return True
        ended = self.run.wait(timeout)
        found = self.run.death() if ended else None
        if found is not None and found[1].death is not None:
            msg = f"source {self.config.fqn}: instance {found[0]} died: {found[1].death}"
            raise ConnectorFailedError(msg)
        return ended

    def stop_instance(self, instance_id: int, mode: str | StopMode = StopMode.CANCEL) -> None:
        """Stop one instance: by default now (what it read and did not append is not
        acked); ``drain`` or ``suspend`` end it as a whole source's stop would."""
        self.run.supervisor.stop_instance(instance_id, mode)

    def restart_instance(self, instance_id: int) -> None:
        """Start a stopped instance again."""
        self.run.supervisor.restart_instance(instance_id)

    def status(self) -> SourceStatus:
        """The source's state and each instance's; from the store when not running here."""
        if self._started:
            return self.run.status()
        record = control.read_control(self.store, self.control_id)
        if record is None:
            return SourceStatus(
                name=self.config.fqn,
                instances=[
                    SourceInstanceStatus(instance_id=i) for i in range(self.config.parallelism)
                ],
            )
        instances = []
        for i in range(self.config.parallelism):
            found = record.instances.get(i)
            state = RunState(found.state) if found is not None else RunState(record.state)
            instances.append(
                SourceInstanceStatus(
                    instance_id=i,
                    state=state,
                    num_restarts=found.restarts if found is not None else 0,
                    death_exception=DeathException.of(found.death) if found is not None else None,
                )
            )
        return SourceStatus(name=self.config.fqn, state=RunState(record.state), instances=instances)

    def stats(self) -> SourceStatus:
        """Every instance's counters (what this worker's runs of it did)."""
        return self.status()


def purge_source(store: Store, config: SourceConfig) -> int:
    """Remove what the store and the data dir keep for a deleted source: its lifecycle
    records and stats (under ``source:<fqn>``), its de-duplication sequences (a source
    made again under the name starts its sequence ids afresh) and its own files
    (``<data dir>/sources/<tenant>/<namespace>/<name>``: a file source's progress).
    Returns the rows removed. Call it only when no run of the source is active.
    """
    cid = control.control_id("source", config.fqn)
    rows = 0
    with store.write() as conn:
        for table in CONTROL_TABLES:
            rows += conn.execute(delete(table).where(table.c.fqfn == cid)).rowcount
        sequences = schema.producer_sequences
        mine = sequences.c.producer.startswith(f"{cid}:", autoescape=True)
        rows += conn.execute(delete(sequences).where(mine)).rowcount
    location = source_state_dir(store.data_dir, config)
    shutil.rmtree(location, ignore_errors=True)
    for parent in list(location.parents)[:3]:  # namespace, tenant, sources/, each once empty
        try:
            parent.rmdir()
        except OSError:
            break
    with contextlib.suppress(FileNotFoundError):
        (store.data_dir / signals.HINTS_DIR / signals.control_hint(cid)).unlink()
    return rows
