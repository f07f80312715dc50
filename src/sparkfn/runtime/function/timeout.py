"""``timeout_interrupts``: an attempt that runs longer than ``timeout_ms`` fails.

:func:`timed` wraps a function's call. A :class:`Watchdog` thread (one per
instance, started on first use) watches the attempt in flight; when its time
is up it raises :class:`_Expired` in the calling thread (CPython's
``PyThreadState_SetAsyncExc``), which interrupts Python code at once and a
blocking call (a socket read, ``time.sleep``) when it returns. Either way
the attempt ends as :class:`MessageTimeoutError`, a message error like any
exception from ``process``: its outputs and state changes are discarded and
the message is negative-acked (:mod:`.redelivery`; dead-lettered after
``max_message_retries`` redeliveries, when set),
and the function goes on with the next message. An attempt that swallowed
the interruption (a bare ``except:``) and returned late is failed all the
same.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

from sparkfn.api.errors import MessageTimeoutError


class _Expired(BaseException):  # noqa: N818 - raised inside user code; BaseException so that
    """Raised into an attempt whose time is up (``except Exception`` does not catch it)."""


_SET_ASYNC_EXC = ctypes.pythonapi.PyThreadState_SetAsyncExc  # no argtypes: None is NULL


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in thread ``thread_id`` at its next Python instruction (``None``:
    withdraw one not raised yet)."""
    _SET_ASYNC_EXC(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None)


class Watchdog:
    """Watches one attempt at a time of one instance."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._attempt = 0  # the attempt watched now (0: none)
        self._deadline = 0.0
        self._thread_id = 0
        self._fired = 0  # the attempt interrupted last
        self._idle = True  # the watching thread waits for an attempt (not for a deadline)
        self._closed = False
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> int:
        """Watch the calling thread's attempt for ``seconds``; returns its token."""
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._watch, name=f"sparkfn-timeout-{self._name}", daemon=True
                )
                self._thread.start()
            self._attempt += 1
            self._deadline = time.monotonic() + seconds
            self._thread_id = threading.get_ident()
            if self._idle:  # else it wakes at the last deadline and sees this one
                self._cond.notify()
            return self._attempt

    def disarm(self, token: int) -> bool:
        """The attempt ``token`` ended; whether its time ran out (an interruption not
        delivered yet is withdrawn)."""
        with self._cond:
            fired = self._fired == token
            if self._attempt == token:
                self._deadline = 0.0
            if fired:
                _raise_in(threading.get_ident(), None)
            return fired

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._deadline:
                    self._idle = True
                    self._cond.wait()
                    continue
                self._idle = False
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._fired = self._attempt
                self._deadline = 0.0
                _raise_in(self._thread_id, _Expired)

    def close(self) -> None:
        """End the watching thread (the instance's object is closed)."""
        with self._cond:
            self._closed = True
            self._deadline = 0.0
            self._cond.notify()


def timed(
    call: Callable[..., Any], watchdog: Watchdog, timeout_ms: int, what: str
) -> Callable[..., Any]:
    """``call``, failing with :class:`MessageTimeoutError` after ``timeout_ms``
    (``watchdog`` watches it; close it with the instance)."""
    seconds = timeout_ms / 1000

    def attempt(*args: Any) -> Any:
        token = watchdog.arm(seconds)
        started = time.monotonic()
        try:
            try:
                result = call(*args)
            finally:
                expired = watchdog.disarm(token)
        except _Expired:
            expired = watchdog.disarm(token) or True
        if expired:
            took = (time.monotonic() - started) * 1000
            msg = f"{what}: processing took {took:.0f} ms, more than timeout_ms {timeout_ms}"
            raise MessageTimeoutError(msg)
        return result

    return attempt
