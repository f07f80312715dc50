"""Each function sees its own package: one package directory on ``sys.path`` at a time.

A function whose ``py`` names a directory (a worker's unpacked ``.zip`` or
wheel, or any directory of modules) imports its code and dependencies from
the paths that directory lists in :data:`MANIFEST` (``{"paths": [...]}``,
relative to it), or from the directory itself when it has no manifest.

Spark reuses its Python worker processes across tasks and across the queries
of one SparkSession, so a process that ran function A may next run function
B, and the worker's driver loads every function it validates. A module
imported for A would then stay in ``sys.modules`` and B's ``import`` would
get A's version of a library both use. :func:`enter_package` prevents that:
before a function is loaded, and before each of its tasks, the paths of the
package entered before leave ``sys.path``, every module imported from them
leaves ``sys.modules``, and the new package's paths go first. Objects that
already hold a module keep it, so a function loaded before the switch goes
on with its own library; only a later ``import`` looks the name up again,
and it then finds the package of the function that runs.

>>> with enter_package("/data/packages/4f1c.../"):   # the lock is held inside
...     module = importlib.import_module("wordcount")
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

MANIFEST = "sparkfn-package.json"

# Held while a package is entered and while a function is loaded from it, so
# two threads of one process (the worker's request threads) cannot interleave
# their switches.
_LOCK = threading.RLock()
_entered: tuple[str, ...] = ()  # the paths of the package entered last
_known: set[str] = set()  # every package path this process has entered
_manifests: dict[str, tuple[str, ...]] = {}  # a package's files never change (content digest)
_files: set[str] = set()  # ``py`` values naming a plain file: no package


def package_paths(py: str | None) -> tuple[str, ...]:
    """The ``sys.path`` entries of the package ``py`` names; none for a file or no ``py``."""
    if not py:
        return ()
    if py in _files:
        return ()
    directory = Path(py).expanduser().resolve()
    key = str(directory)
    if key not in _manifests:
        if not directory.is_dir():
            if directory.is_file():  # a task per member slice asked the file system each time
                _files.add(py)
            return ()
        manifest = directory / MANIFEST
        if manifest.is_file():
            listed = json.loads(manifest.read_text())["paths"]
            _manifests[key] = tuple(str(directory / p) for p in listed)
        else:
            _manifests[key] = (key,)
    return _manifests[key]


@contextmanager
def enter_package(py: str | None) -> Iterator[tuple[str, ...]]:
    """Make ``py``'s package the only one this process imports from, and hold the lock.

    With no package (``py`` a file, or none) the package entered before is
    left, so a plain function never sees another function's modules either.
    Yields the package's paths.
    """
    global _entered
    with _LOCK:
        paths = package_paths(py)
        if paths != _entered or sys.path[: len(paths)] != list(paths):
            others = _known - set(paths)
            sys.path[:] = [p for p in sys.path if p not in _known]
            for name, module in list(sys.modules.items()):
                if _imported_from(module, others):
                    del sys.modules[name]
            sys.path[0:0] = paths
            _known.update(paths)
            _entered = paths
            importlib.invalidate_caches()
        yield paths


def _imported_from(module: ModuleType | None, roots: set[str]) -> bool:
    if module is None or not roots:
        return False
    places = [getattr(module, "__file__", None)]
    path = getattr(module, "__path__", None)  # a package's, also a namespace package's
    if path is not None:
        try:
            places.extend(path)
        except TypeError:  # an odd __path__ of a module that is not from a package dir
            return False
    for place in places:
        if isinstance(place, str) and any(_inside(place, root) for root in roots):
            return True
    return False


def _inside(place: str, root: str) -> bool:
    return place == root or place.startswith(root + os.sep)


def use_package(py: str | None) -> None:
    """:func:`enter_package` for a caller that needs no lock afterwards (a task's start)."""
    with enter_package(py):
        pass
