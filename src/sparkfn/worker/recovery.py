"""A worker whose Spark JVM died comes back by itself.

When the worker's JVM dies (seen by :class:`~sparkfn.worker.session.WorkerSession`'s
watch), :func:`recover`:

1. ends every run of the dead session, each function's and sink's query and
   each group member, in ``ERROR``, its instances' deaths recorded with the
   cause (:meth:`~sparkfn.runtime.lifecycle.supervisor.Supervisor.lose`):
   status and the lifecycle record show it; the query groups are closed;
2. starts a new session (a new JVM). If none starts, the worker's
   ``on_session_failure`` is told, and ``sparkfn worker start`` exits
   non-zero, for its service manager to start it again;
3. starts every run that should run again, as a worker restart would: each
   resumes from its subscription, so under ``effectively_once`` nothing is
   lost or repeated; each start is counted as a restart of the run and its
   instances (``numRestarts``).

The hosted sources run in the worker's own threads, not in Spark: they go on
untouched. A request that needs the session meanwhile waits for the new one.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from sparkfn.runtime.lifecycle import control
from sparkfn.worker.registry import Desired

if TYPE_CHECKING:
    from sparkfn.runtime.function_run import FunctionRun
    from sparkfn.worker.service import Worker

log = logging.getLogger("sparkfn.worker")


def recover(worker: Worker, cause: str) -> None:
    """End the runs of the session whose JVM died (``cause``), start a new session
    and every run again in it."""
    lost: list[FunctionRun] = []

    def end_runs() -> None:
        runs, groups = worker.take_session_runs()
        for run in runs:
            if run.supervisor is not None:
                run.supervisor.lose(cause)
        for group in groups:
            with contextlib.suppress(Exception):  # its query died with the JVM
                group.close()
        lost.extend(runs)

    log.error("%s; starting a new Spark session and every run again", cause)
    try:
        worker.session.replace(cause, end_runs)
    except Exception as exc:  # noqa: BLE001 - said, and the worker exits on it
        message = f"{cause}, and no new Spark session could start: {exc}"
        log.error("%s", message)
        if worker.on_session_failure is not None:
            worker.on_session_failure(message)
        return
    for run in lost:
        _start_again(worker, run)
    log.info("the new Spark session runs; %d run(s) started again", len(lost))


def _start_again(worker: Worker, run: FunctionRun) -> None:
    """Start ``run``'s current version again if it should run, counting the restart."""
    registry = worker.registry_for(run.kind)
    fqn = run.config.fqfn
    try:
        if registry.record(fqn).desired is not Desired.RUNNING:
            return
        started = worker.start_run(registry.get(fqn).config)
        if started is None:  # in a cluster, no longer this worker's: its owner starts it
            return
    except Exception as exc:  # noqa: BLE001 - one run that cannot start must not keep the others down
        log.error("%s %s could not start again after its session was lost: %s", run.kind, fqn, exc)
        return
    control.count_restart(worker.open_store(), run.control_id, range(started.config.parallelism))
