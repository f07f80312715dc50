"""A connector's default failure policy waits out a normal broker restart (issue 40).

A source or sink whose broker went away fails; each new instance the policy
opens fails again at once while the broker is still down. With a function's
default (5 restarts: 1+2+4+8+16 s of backoff) the connector ended in
``ERROR`` after about 31 s, while a RabbitMQ restart takes 23 to 35 s. The
default for connectors must cover about 60 s of outage. This drives the
supervisor's own decision (:func:`decide`) over such an outage, without
waiting for it.
"""

from __future__ import annotations

import pytest

from sparkfn.api.errors import BrokerUnreachableError, FunctionFailure
from sparkfn.api.lifecycle import DeathCause, Response
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.config.policy import FailurePolicy
from sparkfn.connectors.sink.sink_config import sink_function_config
from sparkfn.runtime.lifecycle.policy import RestartHistory, decide

LOST = DeathCause.from_exception(
    BrokerUnreachableError("source public/default/in (rabbitmq): lost RabbitMQ at 127.0.0.1:5672"),
    "failure",
    "source-public/default/in-0",
)


def _survives(policy: FailurePolicy, outage: float) -> bool:
    """Whether the policy still restarts when the broker answers again ``outage`` s after
    the first failure, every instance before that failing the moment it opens."""
    failure = FunctionFailure("public/default/in", 0, LOST, fatal=False)
    history, now = RestartHistory(), 0.0
    while now < outage:
        decision = decide(failure, policy, RestartHistory(history.times, now))
        if decision.response is not Response.REPLACE_INSTANCE:
            return False
        now += decision.delay
        history = history.restarted(now, policy.restart_window)
    return True


def _sink() -> FunctionConfig:
    return sink_function_config(SinkConfig(name="out", sink_type="stdout", inputs=["in"]))


@pytest.mark.parametrize(
    "policy",
    [
        SourceConfig(name="in", source_type="generator", output="out").failure_policy,
        SinkConfig(name="out", sink_type="stdout", inputs=["in"]).failure_policy,
        _sink().failure_policy,
    ],
    ids=["source", "sink", "sink's function"],
)
def test_a_connectors_default_policy_waits_out_a_minute_of_broker_outage(
    policy: FailurePolicy,
) -> None:
    assert policy.outage_covered() >= 60, policy
    assert _survives(policy, 60.0)
    assert not _survives(policy, 2 * policy.outage_covered())  # bounded: it does end


def test_a_functions_default_is_unchanged_and_a_connectors_is_configurable() -> None:
    assert FailurePolicy().outage_covered() == 31
    longer = SourceConfig(name="in", source_type="generator", output="out",
                          failure_policy={"max_restarts": 8})  # fmt: skip
    assert longer.failure_policy.outage_covered() == 183  # 1+2+...+32, then 60 (backoff_max) twice
    assert _survives(longer.failure_policy, 180.0)
