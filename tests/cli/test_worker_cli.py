"""``sparkfn worker start`` refuses what it cannot serve on before it starts anything."""

from __future__ import annotations

import socket
import time

from cli_runner import Cli


def test_a_port_in_use_is_one_error_line_naming_the_port_and_the_flag(cli: Cli) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        result = cli.fail("worker", "start", "--port", str(port))
        took = time.monotonic() - started

    assert result.code == 1, result.describe()
    assert "serving on" not in result.stderr, result.describe()
    line = result.stderr.strip()
    assert line.startswith("error [invalid_config]: "), result.describe()
    assert f"port {port} on 127.0.0.1 is in use" in line and "--port" in line, line
    # Refused before a store was opened or a JVM started: a cold Python start, no more.
    assert took < 30, f"took {took:.1f} s"
