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
    given = _config(dead_letter_topic="dlq", max_message_retries=2)
    assert given.dead_letter_target == "public/default/dlq"
    assert _config(drop_failed_messages=True).dead_letter_target is None
    with pytest.raises(ConfigError, match="drop_failed_messages contradicts dead_letter_topic"):
        _config(drop_failed_messages=True, dead_letter_topic="dlq", max_message_retries=2)


def test_unset_retries_are_pulsars_redelivery_without_end_and_an_explicit_number_is_kept() -> None:
    """Issue 38, point 1: unset is Pulsar's default (no dead-letter policy: delivered again
    without end); N dead-letters after N redeliveries; 0 (which Pulsar's consumer refuses)
    at the first failure, tried in place."""
    unset = _config()
    assert unset.max_message_retries is None and unset.negative_acks
    assert all(unset.redelivers(n) for n in (0, 1, 100, 10_000))
    assert unset.attempts_in_place == 1  # a window or vectorized batch: tried once
    three = _config(max_message_retries=3)
    assert [three.redelivers(n) for n in (0, 2, 3)] == [True, True, False]
    assert three.attempts_in_place == 4
    zero = _config(max_message_retries=0)
    assert not zero.negative_acks and zero.attempts_in_place == 1
    once = _config(processing_guarantees="ATMOST_ONCE")
    assert not once.negative_acks  # its cursor moved before the call: dead-lettered, not lost


def test_a_dead_letter_topic_with_unset_retries_is_pulsars_error() -> None:
    """Pulsar refuses it: the message would never go there."""
    with pytest.raises(ConfigError, match="max retries is set to infinity"):
        _config(dead_letter_topic="dlq")
    with pytest.raises(ConfigError, match="max retries is set to infinity"):
        FunctionConfig.assemble(
            {"name": "f", "py": "f.py", "inputs": ["persistent://public/default/in"],
             "deadLetterTopic": "persistent://public/default/dlq", "maxMessageRetries": -1}
        )  # fmt: skip
    assert _config(dead_letter_topic="dlq", max_message_retries=0).dead_letter_topic


def test_a_user_config_string_that_does_not_parse_is_one_clear_error() -> None:
    """From a YAML file or a REST body, as from the flag: no YAML traceback."""
    with pytest.raises(ConfigError, match=r"user_config is neither JSON nor YAML: .* line 1"):
        FunctionConfig.build(name="f", inputs=["in"], user_config="{bad")


def test_a_stored_zero_from_before_unset_was_the_default_is_kept_until_an_update_unsets_it() -> (
    None
):
    """Every function registered before unset became the default was stored with an explicit
    ``max_message_retries: 0`` (the registry stores the whole config, and 0 was the default),
    as was every one the console created until it sent unset: nothing in the store tells
    those from a user's own 0, so the store keeps them (docs/pulsar-migration.md, upgrading).
    ``functions update --max-message-retries -1`` (Pulsar's unset) makes one Pulsar's default;
    an update that does not name it keeps the 0."""
    from sparkfn.cli.admin_submit import updated
    from sparkfn.config.pulsar import canonical
    from sparkfn.config.pulsar_view import pulsar_view

    before = _config(classname="f.F", max_message_retries=0)
    stored = FunctionConfig.model_validate_json(before.model_dump_json())
    assert stored.max_message_retries == 0 and not stored.negative_acks
    shown = pulsar_view(stored)  # what the CLI's update reads from the worker
    assert shown["maxMessageRetries"] == 0

    def update(**flags: object) -> FunctionConfig:
        changes = canonical({"name": "f", **flags}, known=FunctionConfig.model_fields)
        config, _ = FunctionConfig.assemble(updated(shown, changes))
        return config

    assert update(parallelism=2).max_message_retries == 0
    unset = update(max_message_retries=-1)
    assert unset.max_message_retries is None and unset.negative_acks
    assert update(max_message_retries=3).max_message_retries == 3
