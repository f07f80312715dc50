"""Closing the producers' batchers that still run when the interpreter exits.

A batcher's flusher thread is a daemon, so what was buffered in the last
moments before the main thread ends would be lost with it. Every batcher
with a running thread is registered here, and closed (its buffer appended,
then its thread joined) when the main thread ends.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 (see the registration at the end)
import logging
import threading
from typing import Protocol

logger = logging.getLogger(__name__)


class Closable(Protocol):
    """What is closed at exit: a batcher."""

    @property
    def name(self) -> str:
        """What a failure to close is logged under."""
        ...

    def close(self) -> None:
        """Append what is buffered and stop."""
        ...


_open: set[Closable] = set()


def register(batcher: Closable) -> None:
    """Close ``batcher`` at exit unless :func:`discard` is called first."""
    _open.add(batcher)


def discard(batcher: Closable) -> None:
    """``batcher`` closed (or failed): nothing to do for it at exit."""
    _open.discard(batcher)


def _close_open() -> None:
    for batcher in list(_open):
        try:
            batcher.close()
        except Exception:
            logger.exception("%s: closing at interpreter exit failed", batcher.name)


# threading's exit hooks run when the main thread ends, before atexit's, with
# the interpreter whole. A module imported first during them cannot register
# a hook of its own; pyarrow's first pa.array imports pandas, which imports
# concurrent.futures.thread, which registers one: that is why it is imported
# above, so that a producer's first append may happen at exit.
_register_exit_hook = getattr(threading, "_register_atexit", atexit.register)
_register_exit_hook(_close_open)
