"""Loading a user's function from its file or module, with precise errors.

The loaded :class:`UserFunction` hides which of the three forms (plain
function, ``Function`` class, vectorized) the user wrote. Loading happens on
the driver first, to fail fast with a clear message, and again in each Spark
Python worker process.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from sparkfn.api.errors import ConfigError
from sparkfn.api.function import VECTORIZED_ATTR, SerDe, VectorizedFunction
from sparkfn.config.function import FunctionConfig
from sparkfn.topics.message import SchemaType

COMPAT_DIR = Path(__file__).resolve().parent.parent / "_compat"


class FunctionLoadError(ConfigError):
    """The function's code cannot be loaded: bad file, import error, wrong name or shape."""

    reason = "function_load_error"


@dataclass
class UserFunction:
    """A loaded function in one of its forms."""

    fqfn: str
    obj: Any  # the instance of a Function class, or None for a plain function
    call: Callable[..., Any]  # process / process_batch / the plain function
    takes_context: bool
    vectorized: bool
    batch_format: str = "arrow"

    def initialize(self, context: Any) -> None:
        """Call the object's ``initialize(context)`` if it has one."""
        hook = getattr(self.obj, "initialize", None)
        if callable(hook):
            hook(context)

    def hook(self, name: str) -> Callable[..., Any] | None:
        """The object's method ``name`` (e.g. ``prepare_to_shutdown``), if it has one."""
        method = getattr(self.obj, name, None) if self.obj is not None else None
        return method if callable(method) else None

    def close(self) -> None:
        """Call the object's ``close()`` if it has one."""
        hook = getattr(self.obj, "close", None)
        if callable(hook):
            hook()


def _positional_arity(fn: Callable[..., Any]) -> int:
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _import_file(fqfn: str, path: Path) -> ModuleType:
    if not path.exists():
        msg = f"function {fqfn}: py file {str(path)!r} does not exist"
        raise FunctionLoadError(msg)
    if path.suffix in (".zip", ".whl"):
        if not zipfile.is_zipfile(path):
            msg = f"function {fqfn}: py file {str(path)!r} is not a valid zip archive"
            raise FunctionLoadError(msg)
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
        return ModuleType("_sparkfn_archive")
    if path.suffix != ".py":
        msg = f"function {fqfn}: py file {str(path)!r} must be a .py, .zip or .whl file"
        raise FunctionLoadError(msg)
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) == str(path):
        return existing
    parent = str(path.parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)  # sibling modules of the function import too
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        msg = f"function {fqfn}: cannot load py file {str(path)!r}"
        raise FunctionLoadError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        msg = f"function {fqfn}: importing {path.name} failed: {type(exc).__name__}: {exc}"
        raise FunctionLoadError(msg) from exc
    return module


def _import_module(fqfn: str, name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except Exception as exc:
        msg = f"function {fqfn}: importing module {name!r} failed: {type(exc).__name__}: {exc}"
        raise FunctionLoadError(msg) from exc


def _resolve_target(config: FunctionConfig) -> Any:
    fqfn = config.fqfn
    if config.pulsar_compat and str(COMPAT_DIR) not in sys.path:
        sys.path.insert(0, str(COMPAT_DIR))
    module: ModuleType | None = None
    if config.py:
        module = _import_file(fqfn, Path(config.py).expanduser().resolve())
    classname = config.classname
    if not classname:
        if module is None or not hasattr(module, "process"):
            msg = f"function {fqfn}: no classname given and {config.py} defines no 'process'"
            raise FunctionLoadError(msg)
        return module.process
    module_name, _, attr = classname.rpartition(".")
    if module is not None and module_name in ("", module.__name__):
        target_module = module
    elif module_name:
        target_module = _import_module(fqfn, module_name)
    else:
        msg = (
            f"function {fqfn}: classname {classname!r} must be module.Name when no py file is given"
        )
        raise FunctionLoadError(msg)
    try:
        return getattr(target_module, attr)
    except AttributeError:
        public = sorted(n for n in vars(target_module) if not n.startswith("_"))
        msg = (
            f"function {fqfn}: classname {classname!r}: module {target_module.__name__} has no "
            f"{attr!r} (it defines: {', '.join(public) or 'nothing'})"
        )
        raise FunctionLoadError(msg) from None


def user_function(fqfn: str, target: Any) -> UserFunction:
    """Wrap a function in any of its forms: a module with ``process``, a class
    (instantiated with no arguments), an instance, or a plain function."""
    if isinstance(target, ModuleType):
        if not callable(getattr(target, "process", None)):
            msg = f"function {fqfn}: module {target.__name__} defines no process()"
            raise FunctionLoadError(msg)
        target = target.process
    obj = target
    if inspect.isclass(target):
        try:
            obj = target()
        except Exception as exc:
            msg = (
                f"function {fqfn}: creating {target.__name__}() failed: {type(exc).__name__}: {exc}"
            )
            raise FunctionLoadError(msg) from exc
    if isinstance(obj, VectorizedFunction):
        return UserFunction(fqfn, obj, obj.process_batch, True, True, obj.batch_format)
    if inspect.isroutine(obj) or (callable(obj) and not hasattr(obj, "process")):
        arity = _positional_arity(obj)
        if arity not in (1, 2):
            name = getattr(obj, "__name__", repr(obj))
            msg = f"function {fqfn}: {name!r} must take (input) or (input, context); it takes {arity} arguments"
            raise FunctionLoadError(msg)
        batch_format = getattr(obj, VECTORIZED_ATTR, None)
        return UserFunction(
            fqfn, None, obj, arity == 2, batch_format is not None, batch_format or "arrow"
        )
    process = getattr(obj, "process", None)
    if not callable(process):
        msg = f"function {fqfn}: {type(obj).__name__} has no process(self, input, context) method"
        raise FunctionLoadError(msg)
    return UserFunction(fqfn, obj, process, _positional_arity(process) >= 2, False)


def load_function(config: FunctionConfig) -> UserFunction:
    """Load ``config``'s code; raise :class:`FunctionLoadError` naming what is wrong."""
    target = _resolve_target(config)
    if not (inspect.isclass(target) or callable(target) or hasattr(target, "process")):
        msg = (
            f"function {config.fqfn}: classname {config.classname!r} is a "
            f"{type(target).__name__}, not a class or function"
        )
        raise FunctionLoadError(msg)
    return user_function(config.fqfn, target)


# --- serdes ----------------------------------------------------------------------


class Serde:
    """Decodes input bytes for the function and encodes its results, per topic."""

    def __init__(self, name: str, schema_type: SchemaType, topic: str, fqfn: str) -> None:
        self.topic = topic
        self.fqfn = fqfn
        self.schema_type = schema_type
        self.custom: SerDe | None = None
        if name not in ("auto", "bytes", "string", "json"):
            self.custom = _load_serde(fqfn, name)
            self.kind = "custom"
        else:
            self.kind = schema_type.value if name == "auto" else name

    def decode(self, data: bytes | None) -> Any:
        """Topic bytes → the value the function sees."""
        if data is None:
            return None
        if self.custom is not None:
            return self.custom.deserialize(data)
        if self.kind == "string":
            return data.decode("utf-8")
        if self.kind == "json":
            return json.loads(data)
        return data

    def encode(self, value: Any) -> bytes:
        """A function result → topic bytes; raises ``TypeError`` naming the function and topic."""
        if self.custom is not None:
            return bytes(self.custom.serialize(value))
        if self.kind == "json":
            try:
                return json.dumps(value, separators=(",", ":")).encode()
            except (TypeError, ValueError) as exc:
                msg = (
                    f"function {self.fqfn} returned a {type(value).__name__} for topic {self.topic} "
                    f"(json) that is not JSON-serialisable: {exc}"
                )
                raise TypeError(msg) from exc
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            if self.kind == "string":
                data.decode("utf-8")
            return data
        msg = (
            f"function {self.fqfn} returned a {type(value).__name__} ({value!r:.60}) for topic "
            f"{self.topic} (schema {self.kind}); expected str or bytes"
        )
        raise TypeError(msg)


def _load_serde(fqfn: str, name: str) -> SerDe:
    module_name, _, attr = name.replace(":", ".").rpartition(".")
    module = _import_module(fqfn, module_name)
    cls = getattr(module, attr, None)
    if cls is None:
        msg = f"function {fqfn}: serde {name!r}: module {module_name} has no {attr!r}"
        raise FunctionLoadError(msg)
    serde = cls() if inspect.isclass(cls) else cls
    if not (hasattr(serde, "serialize") and hasattr(serde, "deserialize")):
        msg = f"function {fqfn}: serde {name!r} needs serialize() and deserialize() methods"
        raise FunctionLoadError(msg)
    return serde  # type: ignore[return-value]
