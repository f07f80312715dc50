"""The processes of a crash-test child's session, read from /proc.

Children are started as session leaders, so their whole tree (the JVM,
Spark's Python daemons, which make process groups of their own, and their
workers) shares the child's session id.
"""

from __future__ import annotations

from pathlib import Path


def session_processes(sid: int) -> dict[int, int]:
    """``{pid: ppid}`` of every process in session ``sid``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid:  # fields after "(comm)": state ppid pgrp session ...
            found[int(entry.name)] = int(fields[1])
    return found
