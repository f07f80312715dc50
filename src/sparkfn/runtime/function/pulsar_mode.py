"""Whether a function gets Pulsar's serde and Context behaviour: decided by its code.

A Pulsar user's file runs as it is, with no flag: a function gets Pulsar's
behaviour (:class:`~sparkfn.api.serde.IdentitySerDe` on ``bytes`` topics,
Pulsar's ``ClearTextSecretsProvider``) when

* its code imports ``pulsar`` (``from pulsar import Function``, ...), or
* its class derives from a class of the real ``pulsar-client`` package, or
* it is a native function (a plain ``process(input)``) whose file imports
  no SDK at all, as Pulsar's native Python functions are written.

A file that imports ``sparkfn`` and not ``pulsar`` keeps sparkfn's
behaviour (``bytes`` in, ``bytes`` or ``str`` out). ``pulsar_compat`` in the
config (``--pulsar-compat``, ``pulsarCompat``) overrides the decision either way.

``import pulsar`` always resolves: to sparkfn's stand-in
(:mod:`sparkfn._compat.pulsar`), which goes first on ``sys.path`` for a
function that imports it, so a ``pulsar-client`` installed beside sparkfn
changes nothing; and at the end of ``sys.path`` otherwise, so a helper
module that imports ``pulsar`` never fails with ``ModuleNotFoundError``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import zipfile
from pathlib import Path
from typing import Any

from sparkfn.config.function import FunctionConfig

COMPAT_DIR = Path(__file__).resolve().parent.parent.parent / "_compat"


def _roots(source: bytes) -> set[str]:
    """The top-level packages ``source`` imports (at any depth of the code)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()  # the import names what is wrong
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _module_source(name: str) -> bytes:
    """The source of importable module ``name`` (a ``.py``), or nothing."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return b""
    origin = spec.origin if spec is not None else None
    if origin is None or not origin.endswith(".py"):
        return b""
    try:
        return Path(origin).read_bytes()
    except OSError:
        return b""


def imported_roots(config: FunctionConfig) -> set[str]:
    """What the function's code imports: its ``.py`` file's imports, else (an
    archive or package) those of the module its ``classname`` names."""
    if config.py and config.py.endswith(".py"):
        path = Path(config.py).expanduser()
        try:
            return _roots(path.read_bytes())
        except OSError:
            return set()  # loading names the missing file
    if config.classname:
        module, _, _ = config.classname.rpartition(".")
        module = module or config.classname
        if config.py and config.py.endswith((".zip", ".whl")):
            return _roots(_archived_source(Path(config.py).expanduser(), module))
        return _roots(_module_source(module))
    return set()


def _archived_source(archive: Path, module: str) -> bytes:
    """The source of ``module`` inside a ``.zip``/``.whl``, or nothing."""
    base = module.replace(".", "/")
    try:
        with zipfile.ZipFile(archive) as zipped:
            names = set(zipped.namelist())
            for name in (f"{base}.py", f"{base}/__init__.py"):
                if name in names:
                    return zipped.read(name)
    except (OSError, zipfile.BadZipFile):
        pass  # loading names what is wrong with it
    return b""


def object_roots(target: Any) -> set[str]:
    """What the module that defines ``target`` (a class, object or function) imports."""
    module = sys.modules.get(getattr(target, "__module__", None) or type(target).__module__)
    try:
        source = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):
        return set()
    return _roots(source.encode())


def make_pulsar_importable(roots: set[str], forced: bool) -> None:
    """Put the stand-in ``pulsar`` package on ``sys.path``: first for code that
    imports ``pulsar`` (or under ``pulsar_compat``), else last."""
    entry = str(COMPAT_DIR)
    if "pulsar" in roots or forced:
        if sys.path[:1] != [entry]:
            if entry in sys.path:
                sys.path.remove(entry)
            sys.path.insert(0, entry)
    elif entry not in sys.path:
        sys.path.append(entry)


def _derives_from_pulsar_client(target: Any) -> bool:
    cls = target if inspect.isclass(target) else type(target)
    return any(
        (getattr(base, "__module__", "") or "").split(".")[0] in ("pulsar", "_pulsar")
        for base in getattr(cls, "__mro__", ())[1:]
    )


def wants_pulsar(config: FunctionConfig, roots: set[str], target: Any, native: bool) -> bool:
    """Whether the function gets Pulsar's behaviour (see the module docstring).

    ``target`` is what the classname names (a class, an object or a function);
    ``native`` says it is a plain function.
    """
    if config.pulsar_compat is not None:
        return config.pulsar_compat
    if "pulsar" in roots or _derives_from_pulsar_client(target):
        return True
    return native and "sparkfn" not in roots
