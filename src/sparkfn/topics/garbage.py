"""Deferred deletion of segment files no longer referenced by the index.

Compaction, retention and topic deletion only *retire* a file: its index
rows go away in the same transaction, and the file itself is deleted after a
grace period, so a reader that looked the segment up just before can still
open it. :func:`collect` deletes retired files whose grace period is over.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, delete, insert, select

from sparkfn.store import schema
from sparkfn.store.store import Store

DEFAULT_GRACE = timedelta(minutes=5)


def retire_locations(
    conn: Connection, locations: Iterable[str], grace: timedelta = DEFAULT_GRACE
) -> None:
    """Schedule files for deletion after ``grace``, inside the caller's transaction."""
    rows = [{"location": loc, "delete_after": datetime.now(UTC) + grace} for loc in locations]
    if rows:
        conn.execute(insert(schema.garbage_files), rows)


def collect(store: Store, now: datetime | None = None) -> int:
    """Delete retired files whose grace period has passed; returns how many."""
    now = now or datetime.now(UTC)
    table = schema.garbage_files
    with store.read() as conn:
        due = [
            r.location
            for r in conn.execute(select(table.c.location).where(table.c.delete_after <= now))
        ]
    for location in due:
        store.path(location).unlink(missing_ok=True)
    if due:
        with store.write() as conn:
            conn.execute(delete(table).where(table.c.location.in_(due)))
    return len(due)


# A staged file younger than this may still be about to be committed.
ORPHAN_GRACE = timedelta(hours=1)

# An orphan candidate is renamed to its name plus this before it is deleted.
DOOMED_SUFFIX = ".doomed"


def collect_orphans(store: Store, older_than: timedelta = ORPHAN_GRACE) -> int:
    """Delete segment files no index row references and nothing will.

    They come from appends that never committed: a producer or Spark task
    that died after staging, a retried task's first attempt, a replayed
    batch. Only files older than ``older_than`` are touched, so a segment
    staged but not yet committed is safe. Returns how many were deleted.

    A commit touches its staged files before it references them
    (:func:`sparkfn.topics.log.commit_segments`), so a file that became
    young is being committed. To rule out a commit touching a file between
    the check and the delete, each candidate is first renamed aside
    (:data:`DOOMED_SUFFIX`, atomic): a commit touching it after that fails
    (the batch is retried and stages again), and one that touched it before
    left it young, which the check of the renamed file sees; it is then
    renamed back. A collector that died between the two steps left a
    renamed file, which the next run restores if it is referenced or young.
    The only cost of the rename: a reader opening a file that was committed
    in the microseconds it was aside fails that read (its task is retried).
    """
    root = store.data_dir / "segments"
    if not root.exists():
        return 0
    cutoff = (datetime.now(UTC) - older_than).timestamp()
    candidates = [
        path
        for path in root.rglob("*")
        if path.is_file()
        and (
            path.suffix == DOOMED_SUFFIX  # left by a collector that died: restored or deleted
            or (path.suffix in (".arrow", ".tmp") and path.stat().st_mtime < cutoff)
        )
    ]
    if not candidates:
        return 0
    with store.read() as conn:
        referenced = set(
            conn.execute(
                select(schema.segments.c.location).where(schema.segments.c.location.is_not(None))
            ).scalars()
        )
        referenced.update(conn.execute(select(schema.garbage_files.c.location)).scalars())
    deleted = 0
    for path in candidates:
        original = path.with_suffix("") if path.suffix == DOOMED_SUFFIX else path
        if original.relative_to(store.data_dir).as_posix() in referenced:
            if original != path:
                restore_aside(original)  # a collector died after renaming it aside
            continue
        deleted += delete_orphan(original, path, cutoff)
    return deleted


def delete_orphan(path: Path, current: Path, cutoff: float) -> bool:
    """Delete the unreferenced file ``path`` (found at ``current``) unless a commit touched it.

    ``True`` if it was deleted; a file touched since ``cutoff`` is put back at ``path``.
    """
    doomed = aside(path)
    try:
        if current != doomed:
            os.rename(current, doomed)  # from here on a commit touching it fails
        touched = doomed.stat().st_mtime >= cutoff
    except FileNotFoundError:  # another collector (or a reader) moved it first
        return False
    if touched:  # a commit touched it just before the rename: it is being committed
        restore_aside(path)
        return False
    doomed.unlink(missing_ok=True)
    return True


def aside(path: Path) -> Path:
    """Where the orphan collector renames ``path`` before it deletes it."""
    return path.with_name(path.name + DOOMED_SUFFIX)


def restore_aside(path: Path) -> bool:
    """Put ``path`` back from where the collector renamed it aside; ``True`` if it was there.

    A reader that found ``path`` in the index but not on disk calls this:
    a collector that died between its rename and its check, or that is
    checking right now, has a committed file aside.
    """
    try:
        os.rename(aside(path), path)
    except FileNotFoundError:
        return False
    return True
