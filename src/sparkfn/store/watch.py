"""Waiting for commit hints without polling them: Linux inotify, else ``stat`` polling.

A waiter that polls hints (:func:`sparkfn.store.signals.stamp`) wakes many
times a second even when nothing happens, and fifty idle functions in one
worker make that most of what they cost. On Linux the kernel tells a process
when a file's attributes change (inotify, ``IN_ATTRIB`` for the ``utime``
that touches a hint), so a waiter sleeps until a hint is touched or its
timeout ends. inotify sees only changes made through this machine's kernel:
a hint touched by another machine on a shared data directory is not
announced, which is one more reason why every waiter still asks the store
at least once a second (see :mod:`~sparkfn.store.signals`).

* :class:`HintStamps` is for one thread that waits (a query's reader);
* :func:`subscribe` calls back from one process-wide thread (supervisors);
* :func:`woken_by` is an event a thread waits on with a timeout (closing
  objects, a worker process's control thread);

both fall back to polling with ``stat`` where inotify is not available.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sparkfn.store.signals import HINTS_DIR, stamp

_LOG = logging.getLogger("sparkfn.store.watch")

# From <sys/inotify.h>.
_IN_ATTRIB = 0x00000004
_IN_CLOSE_WRITE = 0x00000008
_IN_IGNORED = 0x00008000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = _IN_ATTRIB | _IN_CLOSE_WRITE
_EVENT_HEADER = 16  # wd, mask, cookie, len: four 32-bit fields, then the name


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1  # noqa: B018 - present on every Linux libc since 2.9
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def hint_path(data_dir: Path, name: str) -> Path:
    """The file of hint ``name``, to watch; created if it does not exist yet.

    A hint created here is dated 0, as :func:`~sparkfn.store.signals.stamp`
    dates a hint never touched, so creating it does not look like a commit.
    """
    folder = data_dir / HINTS_DIR
    path = folder / name
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return path  # a commit touched it meanwhile
        os.utime(path, ns=(0, 0))
    return path


class Inotify:
    """One inotify descriptor watching hint files; :meth:`read` says which changed."""

    def __init__(self) -> None:
        if _LIBC is None:
            msg = "inotify is not available on this system"
            raise OSError(msg)
        fd = _LIBC.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.fd: int = fd
        self.lost = False  # a watched file went away: its changes are no longer seen

    def add(self, path: Path) -> int:
        """Watch ``path``; returns its watch descriptor (the same for the same file)."""
        assert _LIBC is not None
        wd: int = _LIBC.inotify_add_watch(self.fd, os.fsencode(path), _MASK)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"cannot watch {path}")
        return wd

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for an event; True if one came."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        return bool(ready)

    def read(self) -> set[int]:
        """The watch descriptors with events queued (consumed)."""
        changed: set[int] = set()
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return changed
            at = 0
            while at + _EVENT_HEADER <= len(data):
                wd, mask, _, size = (
                    int.from_bytes(data[at + i : at + i + 4], sys.byteorder) for i in (0, 4, 8, 12)
                )
                if mask & _IN_IGNORED:
                    self.lost = True
                changed.add(wd)
                at += _EVENT_HEADER + size

    def close(self) -> None:
        """Release the descriptor."""
        os.close(self.fd)


# --- one waiting thread -----------------------------------------------------------------


class HintStamps:
    """The stamp of one waiting thread's hints (a query's reader), and its wait for a change.

    :func:`~sparkfn.store.signals.stamp` costs a ``stat`` per hint: a group
    of a thousand members has two thousand hints, stamped at every call of
    its idle reader. Where the kernel announces every touch (``announced``:
    a local store, see :func:`~sparkfn.store.signals.recheck_seconds`), the
    stamp is taken again only when the kernel reported a touch of one of the
    hints since it was last taken; elsewhere (a shared data directory whose
    remote touches the kernel never sees, or no inotify) at every call, as
    before. Meant for one thread per instance, which owns its inotify
    descriptor (another reader of the same hints in the process never takes
    its events), made again when the hints change.
    """

    def __init__(self, data_dir: Path, *, announced: bool) -> None:
        self.data_dir = data_dir
        self.announced = announced
        self._key: tuple[str, ...] | None = None  # the hints self._inotify watches
        self._inotify: Inotify | None = None
        # The hints and their stamp, taken after the waiter's events were read.
        self._last: tuple[tuple[str, ...], tuple[int, ...]] | None = None

    def _waiter(self, key: tuple[str, ...]) -> Inotify | None:
        if key != self._key:
            self.close()
            self._key = key
            waiter = None
            try:
                waiter = Inotify()
                for name in key:
                    waiter.add(hint_path(self.data_dir, name))
            except OSError as exc:
                _LOG.debug("hints in %s are polled: %s", self.data_dir, exc)
                if waiter is not None:
                    waiter.close()
                waiter = None
            self._inotify = waiter
        return self._inotify

    def close(self) -> None:
        """Release the inotify descriptor (made again at the next call)."""
        if self._inotify is not None:
            self._inotify.close()
        self._key, self._inotify, self._last = None, None, None

    def now(self, names: list[str]) -> tuple[int, ...]:
        """The hints' stamp now (their modification times, as ``stamp`` gives them)."""
        key = tuple(names)
        waiter = self._waiter(key)
        last = self._last
        if (
            self.announced
            and waiter is not None
            and not waiter.lost
            and last is not None
            and last[0] == key
            and not waiter.wait(0)
        ):
            return last[1]  # no touch of these hints since it was taken
        if waiter is not None:
            waiter.read()  # read first: a touch after the stamp below is reported next time
        now = stamp(self.data_dir, names)
        self._last = (key, now) if waiter is not None else None
        return now

    def wait(
        self, names: list[str], seen: tuple[int, ...], timeout: float, poll: float
    ) -> tuple[int, ...]:
        """Wait up to ``timeout`` s for a hint in ``names`` to change from ``seen``; the stamp now.

        Sleeps until the kernel reports a touch where it can; otherwise, or
        once a watched file went away, looks with ``stat`` every ``poll`` s.
        """
        deadline = time.monotonic() + timeout
        while True:
            now = self.now(names)
            waiter = self._inotify
            left = deadline - time.monotonic()
            if now != seen or left <= 0:
                return now
            if waiter is not None and not waiter.lost:
                waiter.wait(left)  # the next now() reads what came
            else:
                time.sleep(min(poll, left))


# --- callbacks from one thread ------------------------------------------------------------


class _Subscriptions:
    """One thread and one inotify descriptor for every callback of the process."""

    def __init__(self, inotify: Inotify) -> None:
        self.inotify = inotify
        self.lock = threading.Lock()
        self.callbacks: dict[int, dict[int, Callable[[], None]]] = {}  # wd -> token -> callback
        self.next_token = 0
        thread = threading.Thread(target=self._run, name="sparkfn-hint-watch", daemon=True)
        thread.start()

    def add(self, path: Path, callback: Callable[[], None]) -> Callable[[], None]:
        with self.lock:
            wd = self.inotify.add(path)
            token = self.next_token
            self.next_token += 1
            self.callbacks.setdefault(wd, {})[token] = callback

        def cancel() -> None:
            with self.lock:
                self.callbacks.get(wd, {}).pop(token, None)

        return cancel

    def _run(self) -> None:
        while True:
            self.inotify.wait(3600.0)
            changed = self.inotify.read()
            with self.lock:
                due = [cb for wd in changed for cb in self.callbacks.get(wd, {}).values()]
            for callback in due:
                try:
                    callback()
                except Exception:
                    _LOG.exception("hint callback failed")


_subscriptions: _Subscriptions | None = None
_subscriptions_lock = threading.Lock()


def subscribe(data_dir: Path, name: str, callback: Callable[[], None]) -> Callable[[], None] | None:
    """Call ``callback`` (on a shared thread) whenever hint ``name`` is touched here.

    Returns the function that cancels it, or None where inotify is not
    available (the caller polls the hint instead). A callback must be quick:
    it only wakes its owner.
    """
    global _subscriptions  # noqa: PLW0603 - one watcher per process, started on first use
    with _subscriptions_lock:
        if _subscriptions is None:
            try:
                _subscriptions = _Subscriptions(Inotify())
            except OSError as exc:
                _LOG.debug("hints are polled: %s", exc)
                return None
        subscriptions = _subscriptions
    try:
        return subscriptions.add(hint_path(data_dir, name), callback)
    except OSError as exc:
        _LOG.debug("hint %s is polled: %s", name, exc)
        return None


@contextmanager
def woken_by(data_dir: Path, names: list[str]) -> Iterator[threading.Event]:
    """An event set whenever one of the hints ``names`` is touched here, while in the block.

    The waiter still times out and looks for itself: where inotify is not
    available the event is never set, and a touch can be lost or made on
    another machine. Clear the event before looking, then wait on it.
    """
    event = threading.Event()
    cancels = [subscribe(data_dir, name, event.set) for name in names]
    try:
        yield event
    finally:
        for cancel in cancels:
            if cancel is not None:
                cancel()
