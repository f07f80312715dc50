"""Secrets providers: Pulsar's two and sparkfn's, chosen by ``secrets_provider_classname``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkfn import Context, FunctionConfig, FunctionLoadError
from sparkfn.runtime.function.secrets import (
    ClearTextSecretsProvider,
    EnvironmentBasedSecretsProvider,
    SecretReferenceProvider,
    secrets_provider,
)
from sparkfn.testing import FunctionHarness


def reveal(input: str, context: Context) -> str:
    return f"{context.get_secret('username')}|{context.get_secret('missing')}"


def run(monkeypatch: pytest.MonkeyPatch, **fields: Any) -> str:
    monkeypatch.setenv("DB_USER", "from-env")
    monkeypatch.setenv("username", "named-like-the-secret")
    config = FunctionConfig.build(
        name="secrets",
        classname=f"{__name__}.reveal",
        inputs=["in"],
        output="out",
        secrets={"username": "DB_USER"},
        **fields,
    )
    [output] = FunctionHarness(config).send("x")
    return str(output)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "from-env|None"),  # sparkfn's default: the value names where the secret is
        ({"pulsar_compat": True}, "DB_USER|None"),  # Pulsar's default: the value is the secret
        (
            {"secrets_provider_classname": "secretsprovider.ClearTextSecretsProvider"},
            "DB_USER|None",
        ),
        (
            {
                "secrets_provider_classname": "org.apache.pulsar.functions.secretsprovider.EnvironmentBasedSecretsProvider"
            },
            "named-like-the-secret|None",
        ),
        (
            {"pulsar_compat": True, "secrets_provider_classname": "SecretReferenceProvider"},
            "from-env|None",
        ),
    ],
)
def test_the_provider_decides_what_a_secret_is(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], expected: str
) -> None:
    assert run(monkeypatch, **fields) == expected


class Upper:
    """A provider of the user's own: any class with provide_secret."""

    def provide_secret(self, secret_name: str, path_to_secret: str) -> str:
        return path_to_secret.upper()


def test_a_provider_class_of_ones_own_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(monkeypatch, secrets_provider_classname=f"{__name__}.Upper") == "DB_USER|None"


def test_an_unknown_provider_fails_when_the_function_loads() -> None:
    with pytest.raises(FunctionLoadError, match="neither a module.Class name nor one of"):
        secrets_provider("public/default/f", "NoSuchProvider", pulsar_compat=False)
    with pytest.raises(FunctionLoadError, match="names no class with a provide_secret"):
        secrets_provider("public/default/f", f"{__name__}.reveal", pulsar_compat=False)
    config = FunctionConfig.build(
        name="f",
        classname=f"{__name__}.reveal",
        inputs=["in"],
        secrets_provider_classname="nowhere.Provider",
    )
    with pytest.raises(FunctionLoadError, match="secrets_provider_classname 'nowhere.Provider'"):
        FunctionHarness(config)


def test_the_providers_by_themselves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets_file = tmp_path / "secrets.yaml"
    secrets_file.write_text("password: hunter2\n")
    monkeypatch.setenv("TOKEN", "t")
    assert ClearTextSecretsProvider().provide_secret("a", "value") == "value"
    assert EnvironmentBasedSecretsProvider().provide_secret("TOKEN", "ignored") == "t"
    reference = SecretReferenceProvider()
    assert reference.provide_secret("a", "env:TOKEN") == "t"
    assert reference.provide_secret("a", f"file:{secrets_file}#password") == "hunter2"
