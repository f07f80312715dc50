"""Processes of this machine as :mod:`sparkfn.runtime.spark.standalone` needs them: from ``/proc``.

A process is known by its pid *and* its start time, so a pid the kernel gave
to another process since is never taken for the one recorded; the members of
a session are found by their session id and a marker in their environment,
which every descendant inherits, so nothing outside what was started is
ever signalled. Also the checks before a start: Java there, a port free.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
from collections.abc import Collection
from pathlib import Path

from sparkfn.api.errors import ConfigError


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot); None if it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])  # stat's field 22; fields[0] is 3


def session_members(sessions: Collection[int], marker: str) -> list[int]:
    """Pids of the live processes in one of ``sessions`` whose environment holds ``marker``."""
    wanted = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) not in sessions or fields[0] == "Z":  # state ppid pgrp session
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return found


def check_java() -> None:
    """Raise :class:`ConfigError` unless ``$JAVA_HOME/bin/java``, or ``java`` on the PATH, is there."""
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else None
    if java is not None and not os.access(java, os.X_OK):
        msg = f"JAVA_HOME is {home}, which has no bin/java; Spark needs Java 17"
        raise ConfigError(msg)
    if java is None and shutil.which("java") is None:
        msg = "java was not found on PATH and JAVA_HOME is not set: Spark needs Java 17"
        raise ConfigError(msg)


def check_free(host: str, port: int, option: str) -> None:
    """Raise :class:`ConfigError` naming ``option`` unless ``host:port`` can be listened on."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                msg = f"port {port} on {host} is in use by another process; choose another with {option}"
            else:
                msg = f"cannot listen on {host}:{port}: {exc.strerror or exc} ({option})"
            raise ConfigError(msg) from None


def free_port(host: str) -> int:
    """A port of ``host`` that no one listens on now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` of the file at ``path``, under its name (or why it cannot be read)."""
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return f"({path}: {exc})"
    return f"--- {path} ---\n" + "\n".join(text)
