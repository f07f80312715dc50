"""The worker's app served by uvicorn in a thread of the test process.

The same app ``sparkfn worker start`` serves, over HTTP on 127.0.0.1, without
a child process: for routes whose behaviour needs no Spark run.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI

from waiting import until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(app: FastAPI, timeout: float = 30.0) -> Iterator[httpx.Client]:
    """Serve ``app`` on a free port until the block ends; yields a client with its base URL."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="test-app-server", daemon=True)
    thread.start()

    def serving() -> bool:
        assert thread.is_alive(), f"the app's server on port {port} ended before serving"
        return bool(server.started)

    until(serving, f"the app to serve on port {port}", timeout, every=0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout)
