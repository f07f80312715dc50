"""Loading a user's function from its file or module, with precise errors.

The loaded :class:`UserFunction` hides which of the three forms (plain
function, ``Function`` class, vectorized) the user wrote. Loading happens on
the driver first, to fail fast with a clear message, and again in each Spark
Python worker process.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from sparkfn._usercode import import_file, import_module, resolve_classname
from sparkfn.api.errors import FunctionLoadError
from sparkfn.api.function import VECTORIZED_ATTR, VectorizedFunction
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.pulsar_mode import (
    COMPAT_DIR,
    imported_roots,
    make_pulsar_importable,
    object_roots,
    wants_pulsar,
)
from sparkfn.runtime.function.secrets import secrets_provider
from sparkfn.runtime.function.serde import Serde
from sparkfn.runtime.spark.isolation import enter_package, package_paths

__all__ = ["COMPAT_DIR", "Serde", "UserFunction", "function_of", "load_function", "user_function"]


@dataclass
class UserFunction:
    """A loaded function in one of its forms."""

    fqfn: str
    obj: Any  # the instance of a Function class, or None for a plain function
    call: Callable[..., Any]  # process / process_batch / the plain function
    takes_context: bool
    vectorized: bool
    batch_format: str = "arrow"
    # Pulsar's serde and Context behaviour (sparkfn.runtime.function.pulsar_mode).
    pulsar: bool = False

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


def _resolve_target(config: FunctionConfig, roots: set[str]) -> Any:
    fqfn = config.fqfn
    make_pulsar_importable(roots, bool(config.pulsar_compat))
    module: ModuleType | None = None
    classname = config.classname
    if package_paths(config.py):  # a package directory, entered by load_function
        if not classname:
            msg = f"function {fqfn}: py {config.py} is a package; classname must name its code"
            raise FunctionLoadError(msg)
    elif config.py:
        path = Path(config.py).expanduser().resolve()
        module = import_file(f"function {fqfn}", path, FunctionLoadError)
    if not classname:
        if module is None or not hasattr(module, "process"):
            msg = f"function {fqfn}: no classname given and {config.py} defines no 'process'"
            raise FunctionLoadError(msg)
        return module.process
    if "." not in classname and (module is None or not hasattr(module, classname)):
        # Pulsar's rule: a classname without a dot names a module, whose
        # process(input) is the function.
        return _module_process(fqfn, module, classname)
    return resolve_classname(f"function {fqfn}", module, classname, FunctionLoadError)


def _module_process(fqfn: str, module: ModuleType | None, classname: str) -> Any:
    """``module.process`` for a classname that names a module (the py file's, or an importable one)."""
    if module is None or module.__name__ != classname:
        module = import_module(f"function {fqfn}", classname, FunctionLoadError)
    process = getattr(module, "process", None)
    if not callable(process):
        public = sorted(n for n in vars(module) if not n.startswith("_"))
        msg = (
            f"function {fqfn}: classname {classname!r} names module {module.__name__}, which "
            f"defines neither process() nor {classname!r} (it defines: "
            f"{', '.join(public) or 'nothing'})"
        )
        raise FunctionLoadError(msg)
    return process


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
    """Load ``config``'s code; raise :class:`FunctionLoadError` naming what is wrong.

    Its secrets provider is checked here too, so a wrong one fails before any message.
    The function's package is entered first (:mod:`sparkfn.runtime.spark.isolation`), so
    it imports its own modules and libraries, not another function's. Whether it
    gets Pulsar's behaviour is decided here (:mod:`sparkfn.runtime.function.pulsar_mode`).
    """
    with enter_package(config.py):
        roots = imported_roots(config)
        target = _resolve_target(config, roots)
        if not (inspect.isclass(target) or callable(target) or hasattr(target, "process")):
            msg = (
                f"function {config.fqfn}: classname {config.classname!r} is a "
                f"{type(target).__name__}, not a class or function"
            )
            raise FunctionLoadError(msg)
        loaded = user_function(config.fqfn, target)
        loaded.pulsar = wants_pulsar(config, roots, target, native=loaded.obj is None)
        secrets_provider(
            config.fqfn,
            config.secrets_provider_classname,
            loaded.pulsar,
            config.secrets_provider_config,
        )
        return _fits_window(config, loaded)


def _fits_window(config: FunctionConfig, user: UserFunction) -> UserFunction:
    """A window function needs ``window_config``; a vectorized one cannot have it."""
    from sparkfn.api.window import WindowFunction

    if isinstance(user.obj, WindowFunction) and config.window_config is None:
        msg = (
            f"function {config.fqfn}: {type(user.obj).__name__} is a WindowFunction; "
            "give it window_config (windowConfig, --window-length-count, ...)"
        )
        raise FunctionLoadError(msg)
    if user.vectorized and config.window_config is not None:
        msg = (
            f"function {config.fqfn}: a vectorized function cannot have window_config; "
            "write process(inputs, context) over a window's messages"
        )
        raise FunctionLoadError(msg)
    window = config.window_config
    if window is not None and window.event_time:
        from sparkfn.runtime.function.window import load_extractor

        load_extractor(config)  # a wrong one fails here, before any message
    return user


def function_of(config: FunctionConfig, target: Any) -> UserFunction:
    """:func:`user_function` of code given as an object (the test harness), with
    Pulsar's behaviour decided from the code's module."""
    loaded = user_function(config.fqfn, target)
    roots = object_roots(target)
    loaded.pulsar = wants_pulsar(config, roots, target, native=loaded.obj is None)
    return loaded
