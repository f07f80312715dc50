"""Secrets providers: what ``context.get_secret(name)`` returns for a configured secret.

A function's ``secrets`` maps a name to a configured value; its secrets
provider (``secrets_provider_classname``) turns that value into the secret,
with Pulsar's interface ``provide_secret(secret_name, path_to_secret)``:

* :class:`ClearTextSecretsProvider` (Pulsar's default, and sparkfn's under
  ``pulsar_compat``): the configured value is the secret;
* :class:`SecretReferenceProvider` (sparkfn's default): the value says where
  the secret is, ``env:VAR`` or ``VAR`` in the environment, ``file:PATH#key``
  in a JSON or YAML file;
* :class:`EnvironmentBasedSecretsProvider` (Pulsar's): the environment
  variable named like the secret.

Pulsar's class names (``secretsprovider.ClearTextSecretsProvider``, the Java
``org.apache.pulsar.functions.secretsprovider...`` ones) and the bare class
names pick these; any other ``module.Class`` with ``provide_secret`` is
imported.

>>> ClearTextSecretsProvider().provide_secret("username", "alice")
'alice'
"""

from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from sparkfn._usercode import import_module
from sparkfn.api.errors import FunctionLoadError


class SecretsProvider(ABC):
    """Pulsar's secrets provider interface."""

    def init(self, config: Any) -> None:  # noqa: B027 - optional hook, as in Pulsar
        """Called once with the provider's configuration: ``secrets_provider_config``
        (Pulsar's ``--secrets-provider-config``), ``None`` when not given."""

    @abstractmethod
    def provide_secret(self, secret_name: str, path_to_secret: Any) -> Any:
        """The secret ``secret_name``, whose configured value is ``path_to_secret``."""


class ClearTextSecretsProvider(SecretsProvider):
    """The configured value is the secret (Pulsar's default)."""

    def provide_secret(self, secret_name: str, path_to_secret: Any) -> Any:
        """Return ``path_to_secret`` itself."""
        return path_to_secret


class EnvironmentBasedSecretsProvider(SecretsProvider):
    """The environment variable named ``secret_name`` (Pulsar's; the value is not read)."""

    def provide_secret(self, secret_name: str, path_to_secret: Any) -> str | None:
        """``os.environ[secret_name]``, or ``None``."""
        return os.environ.get(secret_name)


class SecretReferenceProvider(SecretsProvider):
    """The configured value says where the secret is (sparkfn's default)."""

    def provide_secret(self, secret_name: str, path_to_secret: Any) -> str | None:
        """:func:`resolve_secret` of the configured value."""
        return resolve_secret(str(path_to_secret))


def resolve_secret(spec: str) -> str | None:
    """``env:VAR`` or ``VAR`` → the environment; ``file:PATH#key`` → a key of a JSON/YAML file.

    >>> resolve_secret("env:HOME") == os.environ.get("HOME")
    True
    """
    if spec.startswith("file:"):
        path, _, key = spec[5:].partition("#")
        import yaml

        data = yaml.safe_load(Path(path).read_text())
        if not key:
            return str(data)
        value = data.get(key) if isinstance(data, dict) else None
        return None if value is None else str(value)
    return os.environ.get(spec.removeprefix("env:"))


_JAVA_PACKAGE = "org.apache.pulsar.functions.secretsprovider."
_BUILTIN: dict[str, type[SecretsProvider]] = {
    name: cls
    for cls in (ClearTextSecretsProvider, EnvironmentBasedSecretsProvider, SecretReferenceProvider)
    for name in (
        cls.__name__,
        f"secretsprovider.{cls.__name__}",
        f"{_JAVA_PACKAGE}{cls.__name__}",
        f"{__name__}.{cls.__name__}",
    )
}


def secrets_provider(
    fqfn: str, classname: str | None, pulsar_compat: bool, provider_config: Any = None
) -> Any:
    """The provider ``classname`` names (default: Pulsar's under ``pulsar_compat``, else
    sparkfn's), initialized with ``provider_config`` (``secrets_provider_config``); a
    :class:`FunctionLoadError` naming the function if it cannot be."""
    if classname is None:
        classname = "ClearTextSecretsProvider" if pulsar_compat else "SecretReferenceProvider"
    target: Any = _BUILTIN.get(classname)
    what = f"function {fqfn}: secrets_provider_classname {classname!r}"
    if target is None:
        module_name, _, attr = classname.replace(":", ".").rpartition(".")
        if not module_name:
            known = ", ".join(sorted(n for n in _BUILTIN if "." not in n))
            msg = f"{what} is neither a module.Class name nor one of: {known}"
            raise FunctionLoadError(msg)
        target = getattr(import_module(what, module_name, FunctionLoadError), attr, None)
    provider = target() if inspect.isclass(target) else target
    if not callable(getattr(provider, "provide_secret", None)):
        msg = f"{what} names no class with a provide_secret(secret_name, path_to_secret) method"
        raise FunctionLoadError(msg)
    init = getattr(provider, "init", None)
    if callable(init):
        init(provider_config)
    return provider
