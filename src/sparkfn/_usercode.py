"""Importing a user's code from a file or a module, with errors that name who asked.

Functions and connectors are both given as a ``py`` file (a ``.py``, or a
``.zip``/``.whl`` put on ``sys.path``) and/or a ``classname`` ``module.Name``.
Every error names the caller (``what``, e.g. ``"function public/default/wc"``
or ``"source public/default/lines"``), the file or name, and what was found,
and is raised as the caller's ``error`` class (a :class:`ConfigError`).

>>> module = import_file("source public/default/lines", Path("lines.py"), ConnectorLoadError)
>>> resolve_classname("source public/default/lines", module, "lines.Lines", ConnectorLoadError)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

from sparkfn.api.errors import ConfigError


def import_file(what: str, path: Path, error: type[ConfigError]) -> ModuleType:
    """Import ``path`` (a ``.py`` file, or put a ``.zip``/``.whl`` on ``sys.path``).

    A ``.py`` file is imported under its stem, once per process; its directory
    goes on ``sys.path`` so that sibling modules import too. For an archive
    the returned module is an empty placeholder: the code is then named by
    ``classname``.
    """
    if not path.exists():
        msg = f"{what}: py file {str(path)!r} does not exist"
        raise error(msg)
    if path.suffix in (".zip", ".whl"):
        if not zipfile.is_zipfile(path):
            msg = f"{what}: py file {str(path)!r} is not a valid zip archive"
            raise error(msg)
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
        return ModuleType("_sparkfn_archive")
    if path.suffix != ".py":
        msg = f"{what}: py file {str(path)!r} must be a .py, .zip or .whl file"
        raise error(msg)
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) == str(path):
        return existing
    parent = str(path.parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        msg = f"{what}: cannot load py file {str(path)!r}"
        raise error(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        msg = f"{what}: importing {path.name} failed: {type(exc).__name__}: {exc}"
        raise error(msg) from exc
    return module


def import_module(what: str, name: str, error: type[ConfigError]) -> ModuleType:
    """``importlib.import_module(name)``; a failure is ``error`` naming the module."""
    try:
        return importlib.import_module(name)
    except Exception as exc:
        msg = f"{what}: importing module {name!r} failed: {type(exc).__name__}: {exc}"
        raise error(msg) from exc


def resolve_classname(
    what: str, module: ModuleType | None, classname: str, error: type[ConfigError]
) -> Any:
    """The object ``classname`` (``module.Name``, or ``Name`` inside ``module``) names.

    ``module`` is what the ``py`` file imported, if there was one: a bare
    ``Name``, or one whose module part is that file's, is looked up there.
    """
    module_name, _, attr = classname.rpartition(".")
    if module is not None and module_name in ("", module.__name__):
        target = module
    elif module_name:
        target = import_module(what, module_name, error)
    else:
        msg = f"{what}: classname {classname!r} must be module.Name when no py file is given"
        raise error(msg)
    try:
        return getattr(target, attr)
    except AttributeError:
        public = sorted(n for n in vars(target) if not n.startswith("_"))
        msg = (
            f"{what}: classname {classname!r}: module {target.__name__} has no "
            f"{attr!r} (it defines: {', '.join(public) or 'nothing'})"
        )
        raise error(msg) from None
