"""Where a worker's function runs: a member of the worker's query group, or a query of its own.

One group per worker for now (:data:`~sparkfn.runtime.group.run.DEFAULT_GROUP`);
a function that sets Spark settings of its own (``spark_conf``, ``resources``),
a trigger interval or a topics pattern keeps a query of its own (see
docs/architecture.md), and so does a member that keeps exceeding the group's
budgets: the group calls :meth:`Placement.hot`, and the worker moves it out
(a stop, then a start) on a thread of its own. It stays dedicated while this
worker runs.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkfn.api.lifecycle import StopMode
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group.run import DEFAULT_GROUP, QueryGroup, groupable
from sparkfn.store.store import Store
from sparkfn.worker.runs import Runs
from sparkfn.worker.settings import WorkerSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The name these lines had before they left service.py: log settings keep working.
log = logging.getLogger("sparkfn.worker.service")


class Placement:
    """The worker's query groups and the functions moved out of them.

    Its state is guarded by the lock of the worker's :class:`~sparkfn.worker.runs.Runs`,
    so a move out and a shutdown see one picture of runs and groups.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        runs: Runs,
        *,
        spark: Callable[[], SparkSession],
        open_store: Callable[[], Store],
        move_out: Callable[[str, StopMode], None],
    ) -> None:
        self._settings = settings
        self._runs = runs
        self._spark = spark
        self._open_store = open_store
        # Stops the function by the mode given and starts it again (on a thread of its own).
        self._move_out = move_out
        self._groups: dict[str, QueryGroup] = {}
        # Functions moved out of their group for exceeding its budgets: a query of their own.
        self._dedicated: set[str] = set()

    def group_for(self, config: FunctionConfig) -> QueryGroup | None:
        """The query group ``config`` runs in (made on first use), or None for a query of its own."""
        if not self._settings.groups or not groupable(config):
            return None
        with self._runs.lock:
            if config.fqfn in self._dedicated:
                return None
            group = self._groups.get(DEFAULT_GROUP)
            if group is None:
                store = self._open_store()
                group = self._groups[DEFAULT_GROUP] = QueryGroup(
                    self._spark(),
                    store,
                    group_name(store, self._settings.worker_id),
                    member_budget=self._settings.group_member_budget,
                    member_seconds=self._settings.group_member_seconds,
                    spacing=self._settings.group_trigger_interval,
                    on_hot=self.hot,
                )
            return group

    def hot(self, fqfn: str, why: str, graceful: bool) -> None:
        """A group member keeps exceeding its budgets: it gets a query of its own.

        Called from the group, which must not wait: the move (a suspend,
        which needs the group's next batch, or with ``graceful`` False a
        cancel, for a member that held a batch and left it already; then a
        start) runs on a thread of its own. Nothing is lost or repeated:
        the stopped run commits what it took, or nothing, and the new one
        resumes from the subscription. It stays dedicated while this worker runs.
        """
        with self._runs.lock:
            if fqfn in self._dedicated or self._runs.closing or self._runs.get(fqfn) is None:
                return
            self._dedicated.add(fqfn)
        log.warning("function %s: %s; moving it to a Spark query of its own", fqfn, why)
        mode = StopMode.SUSPEND if graceful else StopMode.CANCEL
        threading.Thread(target=self._move_out, args=(fqfn, mode), name="sparkfn-move-out").start()

    def take_groups(self) -> list[QueryGroup]:
        """Take out every query group (their session died, or the worker stops)."""
        with self._runs.lock:
            groups = list(self._groups.values())
            self._groups.clear()
        return groups


def group_name(store: Store, worker_id: str) -> str:
    """The name of a worker's query group: ``default`` on a SQLite store (its one worker);
    in a cluster, one per worker (``default-<worker id>``), since its members, its
    checkpoint and its overrun records are kept by name in the shared store and data
    directory, and each worker's group reads only its own members."""
    if store.dialect != "postgresql":
        return DEFAULT_GROUP
    return f"{DEFAULT_GROUP}-{re.sub(r'[^A-Za-z0-9_.-]', '_', worker_id)}"
