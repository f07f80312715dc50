"""forward_source_message_property: a returned value carries its input's properties.

The harness runs the same attempt code as a Spark task, so this holds on Spark
too (tests/runtime/test_properties.py checks it there).
"""

from __future__ import annotations

from pathlib import Path

from sparkfn.config.function import FunctionConfig, snake_fields
from sparkfn.testing import FunctionHarness

EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"


def _config(**more: object) -> FunctionConfig:
    return FunctionConfig.build(
        name="exclaim", py=str(EXCLAIM), inputs=["in"], output="out", **more
    )


def test_the_output_carries_the_input_properties_and_key_by_default() -> None:
    with FunctionHarness(_config()) as harness:
        harness.send("a", key="k", properties={"trace": "t-1", "ünï": "✓"})
        harness.send("b")
        outputs = [m for m in harness.messages if m.kind == "output"]
    assert [(m.value, m.key, m.properties) for m in outputs] == [
        ("a!", "k", {"trace": "t-1", "ünï": "✓"}),
        ("b!", None, {}),
    ]


def test_forwarding_can_be_turned_off() -> None:
    config = _config(forward_source_message_property=False)
    with FunctionHarness(config) as harness:
        harness.send("a", key="k", properties={"trace": "t-1"})
        outputs = [m for m in harness.messages if m.kind == "output"]
    assert [(m.value, m.key, m.properties) for m in outputs] == [("a!", "k", {})]


def test_pulsars_camel_case_name_is_accepted() -> None:
    config = FunctionConfig.build(
        **snake_fields(
            {
                "name": "f",
                "py": str(EXCLAIM),
                "inputs": ["in"],
                "forwardSourceMessageProperty": False,
            }
        )
    )
    assert config.forward_source_message_property is False
