"""The control thread in each Spark Python worker process (DESIGN.md 2.3, "Objects").

Spark keeps Python worker processes between batches, and with them the user
objects sparkfn created there; once a query stops, no task will ever reach
an idle worker again. So the first user object a worker creates starts a
small daemon thread that reads the supervisor's commands from the store
(when their commit hint is touched, or once a second) and acts on this
process's objects:

* ``cancel``  -- interrupt: a running task of those instances fails at its
  next batch boundary (and closes the objects on its way out);
* ``close``   -- ``close()`` (failure, fatal, cancel);
* ``graceful_close`` -- ``prepare_to_shutdown()`` (when the final batch did
  not reach the object; what it emits is appended here, in one transaction
  per topic), ``shutdown()``, then ``close()`` (drain, suspend).

Each close is acknowledged by marking the object closed in the store, so the
supervisor knows every object was closed or can name those that were not.
Calls hold the object's lock, so they never overlap a task's calls. A
thread whose process holds no object of its store any more ends after a few
seconds (and releases its connections); the next object starts a new one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from sparkfn.runtime.function.emit import Emitted
from sparkfn.runtime.function.instance import FunctionInstance
from sparkfn.runtime.lifecycle import objects
from sparkfn.store import signals, watch
from sparkfn.store.store import Store
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

POLL_SECONDS = 0.2
LOCK_WAIT_SECONDS = 0.2
IDLE_POLLS = 25  # a thread with no objects left for its store ends after 5 s
RECHECK_SECONDS = 1.0
_HINT = [signals.COMMANDS_HINT]

_LOG = logging.getLogger("sparkfn.workerctl")
_started: dict[tuple[str, str, int], threading.Thread] = {}
_start_lock = threading.Lock()

# The process's live objects by (control id, version, instance id); executor.py
# owns the dict, this module reads it.
Registry = Callable[[], list[tuple[tuple[str, str, int], FunctionInstance]]]
Forget = Callable[[tuple[str, str, int], FunctionInstance], None]


def ensure_started(store: Store, registry: Registry, forget: Forget) -> None:
    """Start this process's control thread for ``store`` (once per process)."""
    key = (store.url, str(store.data_dir), os.getpid())
    with _start_lock:
        if key in _started:
            return
        last = objects.last_command_id(store)
        thread = threading.Thread(
            target=_loop,
            args=(store, last, registry, forget),
            name="sparkfn-control",
            daemon=True,
        )
        _started[key] = thread
        thread.start()


def _loop(store: Store, last: int, registry: Registry, forget: Forget) -> None:
    # A command touches its hint after it commits; where the kernel announces
    # the touch (store.watch), the thread acts on it at once rather than at
    # its next poll, so a stopping run's close is not a poll interval late.
    with watch.woken_by(store.data_dir, _HINT) as touched:
        _serve(store, last, registry, forget, touched)


def _serve(
    store: Store, last: int, registry: Registry, forget: Forget, touched: threading.Event
) -> None:
    pending: list[objects.Command] = []
    key = (store.url, str(store.data_dir), os.getpid())
    idle = 0
    seen: tuple[int, ...] = ()
    looked = 0.0
    while True:
        # Commands touch a commit hint: between hints, the store is read once
        # every RECHECK_SECONDS (a hint may be lost or late; see store.signals).
        touched.clear()
        now_seen = signals.stamp(store.data_dir, _HINT)
        if pending or now_seen != seen or time.monotonic() - looked >= RECHECK_SECONDS:
            seen, looked = now_seen, time.monotonic()
            try:
                for command in objects.commands_after(store, last):
                    last = command.id
                    pending.append(command)
                pending = [c for c in pending if not apply(store, c, registry, forget)]
            except Exception:
                _LOG.exception("sparkfn control thread: cannot read or apply commands; retrying")
        idle = 0 if pending or _has_objects(store, registry) else idle + 1
        if idle >= IDLE_POLLS:
            with _start_lock:  # ensure_started() registers objects before it looks here
                if not _has_objects(store, registry):
                    del _started[key]
                    store.engine.dispose()  # idle workers keep no connections
                    return
            idle = 0
        touched.wait(POLL_SECONDS)


def _has_objects(store: Store, registry: Registry) -> bool:
    origin = (store.url, str(store.data_dir))
    return any(inst.store_key == origin for _, inst in registry())


def apply(store: Store, command: objects.Command, registry: Registry, forget: Forget) -> bool:
    """Act on ``command`` for this process's objects; False if some were busy (retry later)."""
    done = True
    for key, inst in registry():
        if (
            key[0] != command.control_id
            or inst.instance_id not in command.instances
            or inst.epoch > command.epoch
        ):
            continue
        if command.command == "cancel":
            if inst.interrupt is None:
                inst.interrupt = CancelledError(
                    f"function {inst.config.fqfn} instance {inst.instance_id}: cancelled"
                )
            continue
        if not inst.lock.acquire(timeout=LOCK_WAIT_SECONDS):
            done = False  # a task holds it; the task closes it if it fails, else next poll
            continue
        try:
            close_object(store, key, inst, command.command, forget)
        finally:
            inst.lock.release()
    return done


def close_object(
    store: Store,
    key: tuple[str, str, int],
    inst: FunctionInstance,
    why: str,
    forget: Forget,
) -> None:
    """Finish ``inst`` (gracefully for ``graceful_close``) and acknowledge it."""
    forget(key, inst)
    error = None
    try:
        emitted = inst.finish(graceful=why == "graceful_close")
        if emitted:
            append(store, emitted)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        _LOG.exception("function %s: closing instance %s failed", inst.config.fqfn, key[2])
    if inst.object_id is not None:
        objects.mark_closed(store, key[0], inst.object_id, why, error)


def append(store: Store, emitted: list[Emitted]) -> None:
    """Append messages emitted outside a batch, one transaction per topic."""
    by_topic: dict[str, list[Message]] = {}
    for item in emitted:
        by_topic.setdefault(item.topic, []).append(
            Message(
                value=item.value,
                key=item.key,
                properties=dict(item.properties or {}),
                event_time=item.event_time,
            )
        )
    for topic, messages in by_topic.items():
        Producer(store, topic).send_batch(messages)


class CancelledError(RuntimeError):
    """A task interrupted because its function was cancelled."""
