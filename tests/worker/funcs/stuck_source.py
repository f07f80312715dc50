"""A source whose ``open()`` connects to a broker that never answers and waits for its
first byte with no timeout, as a user's connector may: it never gets past ``open()``."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from sparkfn.api.connector import Record, Source, SourceContext


class StuckSource(Source):
    """Waits in ``open()`` for a byte that never comes."""

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        self.conn = socket.create_connection(("127.0.0.1", int(config["port"])))
        self.conn.recv(1)  # no timeout: the silent port never sends

    def read(self) -> Record | None:
        return None

    def close(self) -> None:
        self.conn.close()
