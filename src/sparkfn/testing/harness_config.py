"""What a :class:`~sparkfn.testing.harness.FunctionHarness` runs: its config and loaded code.

A harness is given code in any form sparkfn runs (a ``.py`` path, a
:class:`~sparkfn.config.function.FunctionConfig`, or a function, class or
module object) and the config fields a unit test usually sets as keyword
arguments; :func:`harness_config` makes the one ``FunctionConfig`` and loads
the code as a real run would, refusing keyword arguments that a given
config should carry itself.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from sparkfn.api.errors import ConfigError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.loader import UserFunction, function_of, load_function


def harness_config(
    function_or_config: Any,
    *,
    name: str = "test",
    inputs: Sequence[str] = ("in",),
    output: str | None = "out",
    user_config: Mapping[str, Any] | None = None,
    secrets: Mapping[str, str] | None = None,
    log_topic: str | None = None,
    dead_letter_topic: str | None = None,
    drop_failed_messages: bool = False,
    max_message_retries: int | None = None,
    parallelism: int = 1,
    auto_create_topics: bool = True,
    classname: str | None = None,
) -> tuple[FunctionConfig, UserFunction]:
    """The config of a harness's arguments and the code it runs (see ``FunctionHarness``)."""

    def given_fields() -> dict[str, Any]:
        """The config's fields from the keyword arguments (code or a path gives the rest)."""
        return {
            "name": name,
            "inputs": list(inputs),
            "output": output,
            "user_config": dict(user_config or {}),
            "secrets": dict(secrets or {}),
            "log_topic": log_topic,
            "dead_letter_topic": dead_letter_topic,
            "drop_failed_messages": drop_failed_messages,
            "max_message_retries": max_message_retries,
            "parallelism": parallelism,
            "auto_create_topics": auto_create_topics,
        }

    if isinstance(function_or_config, str | os.PathLike):
        config = FunctionConfig.build(
            py=os.fspath(function_or_config),  # loaded as --py loads it: no sys.path needed
            classname=classname,
            **given_fields(),
        )
        user = load_function(config)
    elif classname is not None:
        msg = "FunctionHarness: classname goes with the path of a .py file, not with code"
        raise ConfigError(msg)
    elif isinstance(function_or_config, FunctionConfig):
        overridden = {
            "name": name != "test",
            "inputs": tuple(inputs) != ("in",),
            "output": output != "out",
            "user_config": user_config is not None,
            "secrets": secrets is not None,
            "log_topic": log_topic is not None,
            "dead_letter_topic": dead_letter_topic is not None,
            "drop_failed_messages": drop_failed_messages,
            "max_message_retries": max_message_retries is not None,
            "parallelism": parallelism != 1,
            "auto_create_topics": not auto_create_topics,
        }
        given = [key for key, changed in overridden.items() if changed]
        if given:
            msg = (
                f"FunctionHarness: given a FunctionConfig, set {', '.join(given)} in the "
                "config, not as keyword arguments"
            )
            raise ConfigError(msg)
        config = function_or_config
        user = load_function(config)
    else:
        config = FunctionConfig.build(
            classname=_qualified_name(function_or_config), **given_fields()
        )
        user = function_of(config, function_or_config)
    return config, user


def _qualified_name(target: Any) -> str:
    """A ``module.Name`` for the config, naming what the harness was given."""
    if isinstance(target, ModuleType):
        return f"{target.__name__}.process"
    kind = target if inspect.isclass(target) or callable(target) else type(target)
    module = getattr(kind, "__module__", None) or "__main__"
    return f"{module}.{getattr(kind, '__qualname__', type(target).__name__)}"
