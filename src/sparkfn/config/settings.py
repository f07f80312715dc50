"""Where sparkfn keeps its data: the data directory and the store URL.

Both come from arguments, else the environment (``SPARKFN_DATA_DIR``,
``SPARKFN_STORE_URL``), else defaults: ``~/.sparkfn`` and a SQLite file inside
it. Segment files always live under the data directory, which in a cluster
must be a shared file system.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DATA_DIR_ENV = "SPARKFN_DATA_DIR"
STORE_URL_ENV = "SPARKFN_STORE_URL"


@dataclass(frozen=True)
class Settings:
    """Resolved location of a sparkfn installation's data."""

    data_dir: Path
    store_url: str

    @classmethod
    def resolve(cls, data_dir: str | Path | None = None, store_url: str | None = None) -> Settings:
        """Fill what was not given from the environment, then from defaults."""
        raw_dir = data_dir or os.environ.get(DATA_DIR_ENV) or Path.home() / ".sparkfn"
        resolved_dir = Path(raw_dir).expanduser().resolve()
        url = store_url or os.environ.get(STORE_URL_ENV) or ""
        if not url:
            url = f"sqlite:///{resolved_dir / 'sparkfn.db'}"
        return cls(data_dir=resolved_dir, store_url=url)
