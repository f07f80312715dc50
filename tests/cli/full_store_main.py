"""``sparkfn`` on a SQLite store that cannot grow: run as ``python full_store_main.py ARGS``.

Every SQLite connection the command opens gets ``PRAGMA max_page_count``
set to the pages the database has, so the real SQLite fails any write that
needs one more page with ``SQLITE_FULL`` ("database or disk is full"), as
on a full disk. Nothing of sparkfn is replaced: this is the real command.
"""

from __future__ import annotations

import sys
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from sparkfn.cli.main import main


@event.listens_for(Engine, "connect")
def _cannot_grow(dbapi_conn: Any, _record: Any) -> None:
    if type(dbapi_conn).__module__ == "sqlite3":
        cursor = dbapi_conn.cursor()
        pages = cursor.execute("PRAGMA page_count").fetchone()[0]
        cursor.execute(f"PRAGMA max_page_count={pages}")
        cursor.close()


if __name__ == "__main__":
    main(sys.argv[1:])
