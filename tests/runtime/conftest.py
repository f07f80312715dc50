"""The runtime's tests, one folder per room of ``src/sparkfn/runtime``.

``group/``, ``lifecycle/``, ``function/``, ``query/`` and ``spark/`` hold the
tests of that room; the tests of the top-level modules (``status``,
``prometheus``, ``purge``) sit here. Shared by all of them, and found by
path from here: ``funcs/`` (the functions they run) and ``localrun_child.py``
(the crash tests' child process).

Some tests use another room's helpers (``group/test_final_batch.py`` runs
``lifecycle/test_lifecycle.py``'s): every room's folder is on the path, so
such an import works whichever tests were collected first.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for room in ("function", "group", "lifecycle", "query", "spark"):
    if str(HERE / room) not in sys.path:
        sys.path.append(str(HERE / room))
