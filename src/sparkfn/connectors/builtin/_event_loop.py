"""An asyncio loop on a thread of its own, for a connector whose client is asyncio (nats-py)
and whose caller is sparkfn's thread: every call waits a bounded time."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class EventLoop:
    """An asyncio loop on a thread of its own, called from other threads."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float, step: str = "") -> T:
        """Run ``coro`` on the loop and wait at most ``timeout`` s for its result; past it,
        the call is cancelled and a ``TimeoutError`` names the ``step``."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            msg = f"{step} did not end within {timeout:g} s"
            raise TimeoutError(msg) from None

    def close(self) -> None:
        """Stop the loop, join its thread, close it."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()
