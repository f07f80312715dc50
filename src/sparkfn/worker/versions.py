"""A hosted run's versions: creating, updating and deleting one, checked before anything is kept.

A create or an update is refused before the registry keeps it (a taken
name, a subscription another run reads, topics, code or Spark settings the
start would refuse: :func:`~sparkfn.worker.preparing.check`); once kept, a
failed start is undone (a create is forgotten, an update withdrawn and the
previous version started again), so a refused request leaves nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkfn.api.errors import NoWorkerCapacityError
from sparkfn.api.lifecycle import StopMode
from sparkfn.config.connector import SourceConfig
from sparkfn.runtime.query.build import PreparedRun
from sparkfn.store.store import Store
from sparkfn.worker import preparing
from sparkfn.worker.registry import (
    C,
    Desired,
    HostedConfig,
    Registry,
    Version,
    fqn_of,
    kind_of,
    registry_key,
)
from sparkfn.worker.runs import Runs
from sparkfn.worker.settings import WorkerSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The name these lines had before they left service.py: log settings keep working.
log = logging.getLogger("sparkfn.worker.service")


class Versions:
    """The version operations of the worker's functions, sources and sinks, over its runs."""

    def __init__(
        self,
        settings: WorkerSettings,
        runs: Runs,
        *,
        open_store: Callable[[], Store],
        spark: Callable[[], SparkSession],
    ) -> None:
        self._settings = settings
        self._runs = runs
        self._open_store = open_store
        self._spark = spark

    def create(self, config: C, *, package_digest: str | None, who: str) -> Version[C]:
        """Register ``config`` (a function's, source's or sink's: version 1) and start it;
        refused, it leaves nothing."""
        registry: Registry[C] = Registry(self._open_store(), type(config))
        registry.check_free(fqn_of(config))  # a taken name is the first thing to say
        if not isinstance(config, SourceConfig):  # two readers of one would lose messages
            registry.check_subscription_free(config)
        if self._runs.refuse_if_full is not None:  # a full cluster: refused, nothing made
            self._runs.refuse_if_full(registry.key(fqn_of(config)))
        prepared = self._check(config)  # bad topics, code or Spark settings fail first
        subscribed = self._subscribed(config)
        version = registry.create(config, package_digest=package_digest, who=who)
        try:
            self._runs.start(version.config, prepared, checked=True)
        except Exception:
            self._forget(config, keep_subscription=subscribed)
            raise
        return version

    def update(
        self,
        config: C,
        *,
        package_digest: str | None,
        who: str,
        mode: StopMode = StopMode.DRAIN,
    ) -> Version[C]:
        """Make ``config`` the next version; the running one ends by ``mode`` before it starts.

        ``drain`` and ``suspend`` both commit everything the old version took,
        and the new one resumes from the same subscription: nothing is lost or
        repeated across the switch under ``effectively_once``.
        """
        registry: Registry[C] = Registry(self._open_store(), type(config))
        fqfn = fqn_of(config)
        record = registry.record(fqfn)  # an unknown name is said first
        if not isinstance(config, SourceConfig):
            registry.check_subscription_free(config)
        prepared = self._check(config)  # refused here, the running version goes on untouched
        previous = registry.get(fqfn)
        # The mode is kept too: an owner away now (its lease ran out) that comes back still
        # running the old version ends it by this mode (sparkfn.worker.assigned).
        version = registry.update(config, package_digest=package_digest, who=who, mode=mode.value)
        key = registry.key(fqfn)
        self._runs.end(key, mode)
        if record.desired is Desired.RUNNING:
            try:
                self._runs.start(version.config, prepared, checked=True)
            except NoWorkerCapacityError:  # it waited for room before: the new version waits
                registry.set_desired(fqfn, Desired.RUNNING)
            except Exception:
                registry.withdraw(version)  # the previous version is current again
                self._start_again(previous.config)
                raise
        return version

    def delete(self, fqfn: str, *, kind: str = "function") -> Version[Any]:
        """Cancel the run and forget it: versions, state, stats, checkpoint, and,
        with ``cleanup_subscription``, its subscription."""
        registry = self._runs.registry_for(kind)
        current = registry.get(fqfn)
        self._runs.end(registry.key(fqfn), StopMode.CANCEL)
        registry.delete(fqfn)
        preparing.purge(self._open_store(), current.config)
        return current

    def _check(self, config: HostedConfig) -> PreparedRun | None:
        """What a start would refuse, refused before anything is kept (see
        :func:`~sparkfn.worker.preparing.check`); the start takes the run it prepared."""
        return preparing.check(
            self._open_store(),
            config,
            spark=self._spark,
            auto_create_topics=self._settings.allow_auto_topic_creation,
        )

    def _subscribed(self, config: HostedConfig) -> bool:
        """Whether the run's subscription exists already (a kept one it resumes)."""
        return preparing.subscribed(self._open_store(), config)

    def _forget(self, config: HostedConfig, *, keep_subscription: bool) -> None:
        """Undo a create whose start failed: its run, its registry row, what the run wrote,
        and the subscription unless it existed before."""
        kind, fqn = kind_of(config), fqn_of(config)
        self._runs.end(registry_key(kind, fqn), StopMode.CANCEL)
        self._runs.registry_for(kind).delete(fqn)
        preparing.purge(self._open_store(), config, keep_subscription=keep_subscription)

    def _start_again(self, config: HostedConfig) -> None:
        """Start the version that ran before a failed update's; a failure is logged only."""
        try:
            self._runs.start(config)
        except Exception as exc:  # noqa: BLE001 - the update's own error is the answer
            log.error(
                "%s %s could not start its previous version: %s",
                kind_of(config),
                fqn_of(config),
                exc,
            )
