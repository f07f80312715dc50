"""``run_function``: the function's part of each read task, on Spark executors.

For each Spark task it runs the user function over the input rows of every
instance present in the task and yields, in the same Python worker, the
messages it emitted for topics (``output``, ``publish``, ``dead_letter`` and
``log``, as :class:`~sparkfn.runtime.function.emit.EmitBuffer` columns) and
one :class:`TaskSummary` per instance carrying the task's state mutations
and stats. The function sink stages the messages in the task and commits
everything in one transaction per batch.

User objects live in :data:`_INSTANCES`, one per (run, version, instance)
per Python worker process, created and initialized on first use, so a
reused worker keeps its objects across batches. A run is named by its
control id (:func:`sparkfn.runtime.lifecycle.control.control_id`), so a function and a
sink of the same FQFN never share objects, deaths or commands. The
lifecycle rules of DESIGN.md 2.3 are kept here and in
:mod:`sparkfn.runtime.lifecycle.workerctl`:

* a task holds the object's lock for its whole run, so calls never overlap;
* a task that fails ends its worker process (PySpark exits after a failed
  task), so on the way out it closes every object of the process: failure
  means ``close()`` only, and the process will not live to do it later;
* the end-of-stream batch of a drain or suspend carries one marker row per
  instance (``offset == -1``); the task calls ``prepare_to_shutdown()`` and
  what it emits commits with that batch;
* an instance recorded dead in this epoch (``context.fatal``) is never
  revived by a Spark task retry: its tasks fail at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkfn.api.errors import FatalError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.emit import EmitBuffer
from sparkfn.runtime.function.instance import FunctionInstance
from sparkfn.runtime.function.loader import load_function
from sparkfn.runtime.function.rows import InputRows
from sparkfn.runtime.function.topics import StoreTopicCatalog
from sparkfn.runtime.lifecycle import control, objects, workerctl
from sparkfn.runtime.spark import daemon
from sparkfn.runtime.spark.isolation import use_package
from sparkfn.state.store import state_reader
from sparkfn.store.store import Store
from sparkfn.topics.message import distinct
from sparkfn.topics.spark.rows import FINAL_OFFSET, TICK_OFFSET

_LOG = logging.getLogger("sparkfn.executor")

# An object's key: (the control id of its run, the function's version, the instance id).
InstanceKey = tuple[str, str, int]
_INSTANCES: dict[InstanceKey, FunctionInstance] = {}
_ORIGINS: dict[InstanceKey, str] = {}  # the store each instance was loaded for


@dataclass(frozen=True)
class TaskSummary:
    """The non-message part of a :class:`TaskResult`, shipped to the sink."""

    instance_id: int
    mutations: list[Any]
    stats: Any
    final: bool = False  # the end-of-stream batch: prepare_to_shutdown() ran


# What a task's run yields, in order: the messages its instances emitted
# (for the sink's stager, in the same process) and one summary per instance.
TaskPiece = EmitBuffer | TaskSummary


_REGISTRY_LOCK = threading.Lock()


def _registry() -> list[tuple[InstanceKey, FunctionInstance]]:
    with _REGISTRY_LOCK:
        return list(_INSTANCES.items())


def _forget(key: InstanceKey, inst: FunctionInstance) -> None:
    with _REGISTRY_LOCK:
        if _INSTANCES.get(key) is inst:
            del _INSTANCES[key]
            _ORIGINS.pop(key, None)


def close_all(store: Store, why: str, only: str | None = None) -> None:
    """Close every object of this process (its worker is about to exit), or
    only those of run ``only`` (a group's member failed; the process goes on)."""
    for key, inst in _registry():
        if only is None or key[0] == only:
            workerctl.close_object(store, key, inst, why, _forget)


def instance_for(
    config: FunctionConfig, key: InstanceKey, store: Store, epoch: int = 0
) -> FunctionInstance:
    """The process-wide object of ``key``, loaded on first use.

    The key's control id names the run's lifecycle record (a function's
    FQFN, a sink's ``sink:<fqfn>``): deaths and objects are recorded there
    and commands to it reach the object.
    """
    cid, version, instance_id = key
    origin = f"{store.url} {store.data_dir}"
    inst = _INSTANCES.get(key)
    # A group's member's config is the same object batch after batch (plan.MemberSlice):
    # compared by identity first, as comparing a FunctionConfig field by field costs.
    changed = inst is not None and inst.config is not config and inst.config != config
    if inst is not None and (changed or _ORIGINS.get(key) != origin or inst.closed):
        # The same name now means another function (re-created with another
        # config, or in another store): the old object is replaced, so closed.
        workerctl.close_object(store, key, inst, "replaced", _forget)
        inst = None
    if inst is None:
        stopped = _refuse_dead(store, cid, instance_id, epoch)
        topics = StoreTopicCatalog(store)
        inst = FunctionInstance(
            config, instance_id, load_function(config), topics, version, str(store.data_dir), True
        )
        inst.epoch = epoch
        inst.store_key = (store.url, str(store.data_dir))
        inst.on_fatal = _death_recorder(store, cid, inst)
        inst.object_id = objects.register_object(store, cid, instance_id, epoch)
        inst.last_task = stopped
        with _REGISTRY_LOCK:
            _INSTANCES[key] = inst
            _ORIGINS[key] = origin
        workerctl.ensure_started(store, _registry, _forget)
    return inst


def _death_recorder(
    store: Store, control_id: str, inst: FunctionInstance
) -> Callable[[DeathCause], None]:
    def record(cause: DeathCause) -> None:
        control.record_death(
            store, control_id, inst.instance_id, cause, fatal=True, epoch=inst.epoch
        )

    return record


def _refuse_dead(store: Store, control_id: str, instance_id: int, epoch: int) -> bool:
    """A Spark task retry must not revive an instance that died in this epoch.

    Returns whether the instance is stopping or stopped alone (its own drain,
    suspend or stop): a task of a batch planned before that still reaches it
    gets an object that is closed gracefully when the task ends.
    """
    record = control.read_control(store, control_id)
    found = record.instances.get(instance_id) if record is not None else None
    if found is not None and found.dead and found.epoch == epoch and found.death is not None:
        msg = f"function {control_id} instance {instance_id} is dead ({found.death}); not revived"
        raise FatalError(msg)
    return found is not None and found.state in (control.STOPPING, control.STOPPED)


def make_run_function(
    config: FunctionConfig,
    store_url: str,
    data_dir: str,
    version: str,
    epoch: int = 0,
    control_id: str | None = None,
    *,
    isolated: bool = False,
    exit_note: str | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[TaskPiece]]:
    """The function each of the query's read tasks runs over its rows (pickled to executors).

    ``control_id`` names the run's lifecycle record (default the FQFN, a
    function's; a sink's is ``sink:<fqfn>``, see
    :func:`sparkfn.runtime.lifecycle.control.control_id`). ``isolated``: the task goes
    on after this run fails (a group's task runs other members too), so a
    failure closes only this run's objects of the process. ``exit_note`` (a
    file): if a task's worker process dies, its daemon writes the exit status
    there (:func:`sparkfn.runtime.spark.daemon.note_exit_to`; a probe of the
    supervisor's, :mod:`sparkfn.runtime.lifecycle.poison`).
    """
    cid = control_id or config.fqfn

    def run_function(batches: Iterator[pa.RecordBatch]) -> Iterator[TaskPiece]:
        store = Store.cached(store_url, data_dir)
        active: dict[int, FunctionInstance] = {}
        final: set[int] = set()
        current: int | None = None
        note = daemon.note_exit_to(Path(exit_note)) if exit_note else None
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                ids_col = batch.column(batch.schema.get_field_index("instance_id"))
                ids = distinct(ids_col)
                first = batch.column(batch.schema.get_field_index("offset"))[0].as_py()
                marker, tick = first == FINAL_OFFSET, first == TICK_OFFSET
                for instance_id in ids:
                    current = instance_id
                    inst = active.get(instance_id)
                    if inst is None:
                        inst = _enter(config, (cid, version, instance_id), store, epoch)
                        active[instance_id] = inst
                    inst.check_interrupt()
                    if marker:
                        final.add(instance_id)
                        inst.prepare_to_shutdown()
                        continue
                    if tick:  # the clock's: windows due now fire
                        inst.tick()
                        out = inst.take_output()
                        if len(out):
                            yield out
                        continue
                    part = batch if len(ids) == 1 else batch.filter(pc.equal(ids_col, instance_id))
                    if inst.user.vectorized:
                        inst.process_batch(part)
                    else:
                        inst.process_rows(InputRows(part))
                    out = inst.take_output()
                    if len(out):
                        yield out
            for instance_id, inst in active.items():
                current = instance_id
                inst.check_interrupt()
                result = inst.end_task()
                if len(result.emitted):
                    yield result.emitted
                yield TaskSummary(
                    instance_id, result.mutations, result.stats, final=instance_id in final
                )
        except BaseException as exc:
            _fail_task(store, cid, current, exc, epoch, only=cid if isolated else None)
            raise
        finally:
            for instance_id, inst in active.items():
                inst.task_thread = None
                if inst.last_task and not inst.closed:
                    _close_after_task(store, (cid, version, instance_id), inst)
                inst.lock.release()
            if note is not None:
                daemon.forget_note(note)

    return run_function


def _close_after_task(store: Store, key: InstanceKey, inst: FunctionInstance) -> None:
    """Close an object made for an instance that stopped alone, now that its task ended."""
    try:
        workerctl.close_object(store, key, inst, "graceful_close", _forget)
    except Exception:  # the task's outcome stands; the object is marked as the close went
        _LOG.exception("function %s: closing instance %s after its task failed", key[0], key[2])


def _enter(config: FunctionConfig, key: InstanceKey, store: Store, epoch: int) -> FunctionInstance:
    """The instance's object, locked for this task, with the task begun."""
    use_package(config.py)  # the process may have run another function's task before
    while True:
        inst = instance_for(config, key, store, epoch)
        inst.lock.acquire()
        if not inst.closed:
            inst.epoch = max(inst.epoch, epoch)  # an object kept across a restart
            break
        inst.lock.release()  # closed by the control thread meanwhile: take a fresh one
    try:
        inst.begin_task(state_reader(store, config.fqfn))
    except BaseException:
        inst.lock.release()
        raise
    return inst


def _fail_task(
    store: Store,
    control_id: str,
    instance_id: int | None,
    exc: BaseException,
    epoch: int,
    only: str | None = None,
) -> None:
    """A task is failing: record the instance's death unless it is already
    recorded (fatal, cancel), then close this process's objects (``only``: of that run)."""
    if isinstance(exc, GeneratorExit | workerctl.CancelledError | FatalError):
        why = "fatal" if isinstance(exc, FatalError) else "cancelled"
    else:
        why = "failure"
        if instance_id is not None:
            cause = DeathCause.from_exception(exc, "failure", threading.current_thread().name)
            try:
                control.record_death(
                    store, control_id, instance_id, cause, fatal=False, epoch=epoch
                )
            except Exception:  # the store itself may be what failed; the task's error stands
                _LOG.exception(
                    "function %s: cannot record the death of instance %s", control_id, instance_id
                )
    try:
        close_all(store, why, only)
    except Exception:  # the task's own error is what Spark must see; this one is logged
        _LOG.exception("function %s: closing the objects of a failing task failed", control_id)
