"""Sensitive connector fields: masked when shown, the stored value kept when a mask comes back."""

from __future__ import annotations

import pytest

from sparkfn.api.errors import ConfigError
from sparkfn.config.secrets import MASK, is_sensitive, masked, unmasked
from sparkfn.connectors.builtin._config import parse_configs
from sparkfn.connectors.builtin.redis_streams import RedisSinkConfig
from sparkfn.connectors.catalog import definition


def test_the_fields_the_definitions_mark_sensitive_are_the_ones_masked() -> None:
    fields = definition("sink", "redis").config_field_definitions
    marked = {f.field_name for f in fields if f.attributes["sensitive"] == "true"}
    assert marked == {"redisPassword"}
    shown = masked({"redisHosts": "h:1", "redisPassword": "hunter2", "nested": {"apiToken": "t"}})
    assert shown == {"redisHosts": "h:1", "redisPassword": MASK, "nested": {"apiToken": MASK}}
    assert is_sensitive("client_secret")
    assert not is_sensitive("redisHosts")


def test_a_mask_sent_back_keeps_the_stored_secret_and_a_new_value_replaces_it() -> None:
    kept = {"redisPassword": "hunter2", "redisHosts": "h:1"}
    assert unmasked({"redisPassword": MASK, "redisHosts": "h:2"}, kept, "sink a/b/c") == {
        "redisPassword": "hunter2",
        "redisHosts": "h:2",
    }
    assert unmasked({"redisPassword": "new"}, kept, "sink a/b/c") == {"redisPassword": "new"}


def test_a_mask_with_nothing_stored_is_refused_not_kept_as_the_secret() -> None:
    with pytest.raises(ConfigError, match=r"sink a/b/c: configs.redisPassword is the mask"):
        unmasked({"redisPassword": MASK}, {}, "sink a/b/c")


def test_a_bad_secret_is_not_repeated_in_the_error() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_configs(
            RedisSinkConfig,
            {"redisHosts": "h:1", "redisPassword": ["hunter2-in-a-list"]},
            "sink a/b/c (redis)",
        )
    assert "configs.redisPassword" in str(raised.value)
    assert "hunter2" not in str(raised.value)
    assert MASK in str(raised.value)


def test_a_urls_password_is_masked_and_the_stored_url_kept_when_it_comes_back() -> None:
    url = "postgresql://app:hunter2@db.internal:5432/orders"
    shown = masked({"url": url, "table": "t"})
    assert shown == {"url": "postgresql://app:********@db.internal:5432/orders", "table": "t"}
    assert unmasked(shown, {"url": url}, "sink a/b/c") == {"url": url, "table": "t"}
    moved = "postgresql://app:********@elsewhere:5432/orders"
    with pytest.raises(ConfigError, match=r"configs.url holds the mask"):
        unmasked({"url": moved}, {"url": url}, "sink a/b/c")
    assert masked({"url": "postgresql://db/orders"}) == {"url": "postgresql://db/orders"}


def test_every_value_of_a_secrets_map_is_masked_and_kept_when_it_comes_back() -> None:
    secrets = {"apiKey": "k-123", "dsn": "plain-value"}
    shown = masked(secrets, every=True)
    assert shown == {"apiKey": MASK, "dsn": MASK}
    back = unmasked(shown, secrets, "sink a/b/c", field="secrets", every=True)
    assert back == secrets
    with pytest.raises(ConfigError, match=r"sink a/b/c: secrets.other is the mask"):
        unmasked({"other": MASK}, secrets, "sink a/b/c", field="secrets", every=True)
