"""A bad value is refused by name, never coerced into a good-looking one (issue 28, point 8).

The same reading serves a YAML file, the CLI's flags and the worker's REST
body, so refusing here refuses everywhere; the YAML files and flags that
were right stay right.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.errors import ConfigError
from sparkfn.config.connector import SinkConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.config.policy import FailurePolicy

BASE = {"name": "f", "py": "f.py", "inputs": ["in"]}


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"maxMessageRetries": -5}, "max_message_retries: Input should be greater than or equal"),
        ({"max_message_retries": -2}, "(got -2)"),
        ({"maxMessageRetries": True}, "max_message_retries: Input should be a valid integer"),
        ({"parallelism": True}, "parallelism: Input should be a valid integer (got True)"),
        ({"parallelism": 2.0}, "parallelism: Input should be a valid integer (got 2.0)"),
        ({"parallelism": "2"}, "parallelism: Input should be a valid integer (got '2')"),
        ({"maxRecordsPerBatch": False}, "max_records_per_batch: Input should be a valid integer"),
        ({"inputs": "in"}, "inputs: must be a list of topic names (got 'in')"),
        ({"inputs": "in, other"}, "inputs: must be a list of topic names (got 'in, other')"),
        ({"failurePolicy": {"maxRestarts": True}}, "failure_policy.max_restarts: Input should"),
    ],
)
def test_a_wrong_type_or_value_is_refused_naming_the_field_and_what_was_found(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        FunctionConfig.assemble({**BASE, **fields})
    message = str(caught.value)
    assert message.startswith("function f: invalid config: "), message
    assert problem in message


def test_pulsars_unset_retries_minus_one_still_asks_for_nothing() -> None:
    config, _ = FunctionConfig.assemble({**BASE, "maxMessageRetries": -1})
    assert config.max_message_retries is None  # unset, as Pulsar's: redelivered without end


def test_the_failure_policy_reads_camel_case_as_the_top_level_does() -> None:
    camel = {"onFailure": "SHUTDOWN_FUNCTION", "maxRestarts": 2, "restartWindow": "1m",
             "backoffInitial": 0.5, "backoffMultiplier": 3, "backoffMax": "10s",
             "closeTimeout": 5}  # fmt: skip
    config = FunctionConfig.build(**BASE, failurePolicy=camel)
    snake = FunctionConfig.build(
        **BASE,
        failure_policy={
            "on_failure": "SHUTDOWN_FUNCTION",
            "max_restarts": 2,
            "restart_window": 60,
            "backoff_initial": 0.5,
            "backoff_multiplier": 3,
            "backoff_max": 10,
            "close_timeout": 5,
        },
    )
    assert config.failure_policy == snake.failure_policy
    assert config.failure_policy.max_restarts == 2
    # A connector's policy is the same model.
    sink = SinkConfig.build(name="s", sink_type="file", inputs=["in"],
                            failure_policy={"maxRestarts": 7})  # fmt: skip
    assert sink.failure_policy.max_restarts == 7
    with pytest.raises(ConfigError, match="failure_policy: maxRestarts and max_restarts are one"):
        FunctionConfig.build(**BASE, failurePolicy={"maxRestarts": 1, "max_restarts": 2})
    with pytest.raises(ConfigError, match=r"failure_policy.max_restartz: Extra inputs"):
        FunctionConfig.build(**BASE, failurePolicy={"maxRestartz": 1})
    assert FailurePolicy.model_validate({"maxRestarts": 4}).max_restarts == 4


def test_yaml_files_and_flag_values_that_were_right_still_read(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(
        "name: f\npy: f.py\ninputs: [in, other]\nparallelism: 3\nmaxMessageRetries: 2\n"
        "failurePolicy:\n  maxRestarts: 4\n  on_fatal: SHUTDOWN_FUNCTION\n"
    )
    config = FunctionConfig.from_yaml(path, max_records_per_batch=10)
    assert config.inputs == ["public/default/in", "public/default/other"]
    assert (config.parallelism, config.max_message_retries) == (3, 2)
    assert (config.failure_policy.max_restarts, config.max_records_per_batch) == (4, 10)
    path.write_text("name: f\npy: f.py\ninputs: in\n")
    with pytest.raises(ConfigError, match="inputs: must be a list of topic names"):
        FunctionConfig.from_yaml(path)
