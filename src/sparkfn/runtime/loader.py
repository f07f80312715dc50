"""Loading a user's function from its file or module, with precise errors.

The loaded :class:`UserFunction` hides which of the three forms (plain
function, ``Function`` class, vectorized) the user wrote. Loading happens on
the driver first, to fail fast with a clear message, and again in each Spark
Python worker process.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from sparkfn._usercode import import_file, import_module, resolve_classname
from sparkfn.api.errors import FunctionLoadError
from sparkfn.api.function import VECTORIZED_ATTR, SerDe, VectorizedFunction
from sparkfn.config.function import FunctionConfig
from sparkfn.topics.message import SchemaType

COMPAT_DIR = Path(__file__).resolve().parent.parent / "_compat"


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


def _resolve_target(config: FunctionConfig) -> Any:
    fqfn = config.fqfn
    if config.pulsar_compat and str(COMPAT_DIR) not in sys.path:
        sys.path.insert(0, str(COMPAT_DIR))
    module: ModuleType | None = None
    if config.py:
        path = Path(config.py).expanduser().resolve()
        module = import_file(f"function {fqfn}", path, FunctionLoadError)
    classname = config.classname
    if not classname:
        if module is None or not hasattr(module, "process"):
            msg = f"function {fqfn}: no classname given and {config.py} defines no 'process'"
            raise FunctionLoadError(msg)
        return module.process
    return resolve_classname(f"function {fqfn}", module, classname, FunctionLoadError)


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
    module = import_module(f"function {fqfn}", module_name, FunctionLoadError)
    cls = getattr(module, attr, None)
    if cls is None:
        msg = f"function {fqfn}: serde {name!r}: module {module_name} has no {attr!r}"
        raise FunctionLoadError(msg)
    serde = cls() if inspect.isclass(cls) else cls
    if not (hasattr(serde, "serialize") and hasattr(serde, "deserialize")):
        msg = f"function {fqfn}: serde {name!r} needs serialize() and deserialize() methods"
        raise FunctionLoadError(msg)
    return serde  # type: ignore[return-value]
