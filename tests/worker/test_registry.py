"""The worker's registry on both stores: versions kept, names listed, desired state kept."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sparkfn.api.errors import ConfigError, FunctionExistsError, FunctionNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.config.topics_pattern import TopicsPattern
from sparkfn.store import registry_schema
from sparkfn.store.store import Store
from sparkfn.worker.registry import Desired, Registry


def _config(name: str = "exclaim", **fields: object) -> FunctionConfig:
    fields.setdefault("inputs", ["in"])
    return FunctionConfig.build(name=name, py="examples/exclamation.py", **fields)


def test_versions_are_kept_and_any_one_can_be_read(store: Store) -> None:
    registry = Registry(store)
    first = registry.create(_config(), package_digest="sha256:aa", who="alice")
    second = registry.update(_config(parallelism=3), package_digest="sha256:bb", who="bob")

    assert (first.version, second.version) == (1, 2)
    assert registry.get(first.fqfn).config.parallelism == 3
    old = registry.get(first.fqfn, version=1)
    assert (old.config, old.package_digest, old.created_by) == (_config(), "sha256:aa", "alice")
    assert [v.version for v in registry.versions(first.fqfn)] == [2, 1]
    with pytest.raises(FunctionNotFoundError, match="no version 7"):
        registry.get(first.fqfn, version=7)


def test_a_name_is_registered_once_and_deleted_with_its_versions(store: Store) -> None:
    registry = Registry(store)
    registry.create(_config(), package_digest=None, who="alice")
    with pytest.raises(FunctionExistsError, match="public/default/exclaim exists already"):
        registry.create(_config(), package_digest=None, who="alice")
    with pytest.raises(FunctionExistsError):
        registry.check_free("public/default/exclaim")
    registry.check_free("public/default/other")

    assert len(registry.delete("public/default/exclaim")) == 1
    with pytest.raises(FunctionNotFoundError, match="public/default/exclaim does not exist"):
        registry.get("public/default/exclaim")
    with pytest.raises(FunctionNotFoundError):
        registry.update(_config(), package_digest=None, who="alice")
    assert registry.create(_config(), package_digest=None, who="carol").version == 1


def test_names_are_listed_per_namespace_and_desired_state_is_kept(store: Store) -> None:
    registry = Registry(store)
    for name in ("b", "a"):
        registry.create(_config(name), package_digest=None, who="alice")
    registry.create(_config("c", namespace="other"), package_digest=None, who="alice")

    assert registry.names("public", "default") == ["a", "b"]
    assert registry.names("public", "other") == ["c"]
    registry.set_desired("public/default/a", Desired.STOPPED)
    assert registry.record("public/default/a").desired is Desired.STOPPED
    assert [v.fqfn for v in registry.wanted_running()] == ["public/default/b", "public/other/c"]


def test_a_stored_pattern_of_an_older_release_still_reads_and_fails_only_its_run(
    store: Store,
) -> None:
    """A pattern written before patterns had to name their namespace (``public/.*``)
    must not make the function unreadable: listing, get, update and delete go on;
    only its run's start refuses it, naming the pattern."""
    registry = Registry(store)
    version = registry.create(
        _config(inputs=[], topics_pattern="public/default/in-.*"), package_digest=None, who="a"
    )
    old = version.config.model_dump_json().replace("public/default/in-.*", "public/.*")
    with store.write() as conn:
        conn.execute(
            registry_schema.function_versions.update()
            .where(registry_schema.function_versions.c.fqfn == version.fqfn)
            .values(config=old)
        )

    assert registry.get(version.fqfn).config.topics_pattern == "public/.*"
    with pytest.raises(ConfigError, match="must start with its namespace written out"):
        TopicsPattern.parse(registry.get(version.fqfn).config.topics_pattern or "")
    with pytest.raises(ValidationError, match="must start with its namespace written out"):
        FunctionConfig.model_validate_json(old)
    fixed = registry.update(
        _config(inputs=[], topics_pattern="public/default/.*"), package_digest=None, who="a"
    )
    assert registry.get(fixed.fqfn).config.topics_pattern == "public/default/.*"
