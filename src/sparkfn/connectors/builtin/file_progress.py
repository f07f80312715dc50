"""How far the ``file`` source got: a progress file per instance, written durably.

Each instance keeps ``file-progress-<instance>.json`` (:data:`PROGRESS_PREFIX`)
in the progress directory: for every file it owns, the byte offset and line
number after the last record that was appended (a :class:`Position`). The
file is replaced atomically (temporary file, fsync, rename, fsync of the
directory), so a crash leaves the old progress or the new one. On start an
instance reads every instance's file and keeps the furthest position of each
file, so a change of parallelism resumes too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sparkfn.api.connector import SourceContext
from sparkfn.api.errors import ConfigError

if TYPE_CHECKING:
    from sparkfn.connectors.builtin.file_source import FileSourceConfig

PROGRESS_PREFIX = "file-progress-"


@dataclass
class Position:
    """Where reading a file resumes: after ``line`` lines, at byte ``offset``."""

    offset: int = 0
    line: int = 0


def progress_dir(cfg: FileSourceConfig, context: SourceContext, what: str) -> Path:
    """``progress_dir`` if set, else the source's own directory under the data directory."""
    if cfg.progress_dir is not None:
        return Path(cfg.progress_dir).expanduser().resolve()
    state_dir = getattr(context, "state_dir", None)
    if isinstance(state_dir, Path):
        return state_dir
    msg = f"{what}: configs.progress_dir is needed outside sparkfn's runner (no state directory)"
    raise ConfigError(msg)


def load_progress(directory: Path) -> dict[str, Position]:
    """Every instance's progress, merged: the furthest position of each file wins."""
    merged: dict[str, Position] = {}
    for path in sorted(directory.glob(f"{PROGRESS_PREFIX}*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            msg = f"file source progress {path} cannot be read: {exc}"
            raise ValueError(msg) from exc
        for key, entry in data.get("files", {}).items():
            found = Position(int(entry["offset"]), int(entry["line"]))
            if key not in merged or found.offset > merged[key].offset:
                merged[key] = found
    return merged


def write_progress(path: Path, progress: dict[str, Position], mine: Callable[[str], bool]) -> None:
    """Write the progress of the files ``mine`` accepts: temp file, fsync, rename, fsync the directory."""
    data = {
        "version": 1,
        "files": {
            key: {"offset": p.offset, "line": p.line}
            for key, p in sorted(progress.items())
            if mine(key)
        },
    }
    temp = path.with_suffix(".tmp")
    with temp.open("w") as handle:
        json.dump(data, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
