"""FunctionConfig rules that need no Spark: ordering, dead letters."""

from __future__ import annotations

import pytest

from sparkfn.api.errors import ConfigError
from sparkfn.config.function import FunctionConfig, SubscriptionType


def _config(**fields: object) -> FunctionConfig:
    return FunctionConfig.build(name="f", py="f.py", inputs=["in"], **fields)


def test_retain_ordering_forces_failover_over_shared() -> None:
    assert _config(retain_ordering=True).subscription_type is SubscriptionType.FAILOVER
    assert _config(retain_ordering="true").subscription_type is SubscriptionType.FAILOVER
    assert (
        _config(retain_ordering=True, subscription_type="Shared").subscription_type
        is SubscriptionType.FAILOVER
    )


def test_retain_ordering_keeps_an_ordered_subscription_type() -> None:
    config = _config(retain_ordering=True, subscription_type="key_shared")
    assert config.subscription_type is SubscriptionType.KEY_SHARED
    assert _config().subscription_type is SubscriptionType.SHARED


def test_failed_messages_go_to_the_default_dead_letter_topic_unless_dropped() -> None:
    assert _config().dead_letter_target == "public/default/f-DLQ"
    assert _config(dead_letter_topic="dlq").dead_letter_target == "public/default/dlq"
    assert _config(drop_failed_messages=True).dead_letter_target is None
    with pytest.raises(ConfigError, match="drop_failed_messages contradicts dead_letter_topic"):
        _config(drop_failed_messages=True, dead_letter_topic="dlq")


def test_a_user_config_string_that_does_not_parse_is_one_clear_error() -> None:
    """From a YAML file or a REST body, as from the flag: no YAML traceback."""
    with pytest.raises(ConfigError, match=r"user_config is neither JSON nor YAML: .* line 1"):
        FunctionConfig.build(name="f", inputs=["in"], user_config="{bad")
