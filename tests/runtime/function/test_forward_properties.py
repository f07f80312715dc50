"""What an output carries of its input, as Pulsar's Python runtime sets it (issue 38, point 6).

Every output of ``process`` carries ``__pfn_input_topic__`` and
``__pfn_input_msg_id__`` naming its input message. A function with Pulsar's
behaviour (here Pulsar's native ``exclamation.py``) gets nothing else of
its input, as Pulsar's Python runtime forwards neither key nor properties;
sparkfn's own functions, or ``forwardSourceMessageProperty: true``, carry
the input's key and properties too.

The harness runs the same attempt code as a Spark task, so this holds on Spark
too (tests/runtime/function/test_properties.py checks it there, and
tests/worker/test_output_metadata.py on a worker).
"""

from __future__ import annotations

from pathlib import Path

from sparkfn.config.function import FunctionConfig, snake_fields
from sparkfn.runtime.function.rows import INPUT_MESSAGE_PROPERTY, INPUT_TOPIC_PROPERTY
from sparkfn.testing import FunctionHarness

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
EXCLAIM = EXAMPLES / "exclamation.py"
ORIGIN_IN = {INPUT_TOPIC_PROPERTY: "persistent://public/default/in"}


def _config(py: Path = EXCLAIM, **more: object) -> FunctionConfig:
    return FunctionConfig.build(name="exclaim", py=str(py), inputs=["in"], output="out", **more)


def _outputs(harness: FunctionHarness) -> list[tuple[object, str | None, dict[str, str]]]:
    return [(m.value, m.key, m.properties) for m in harness.messages if m.kind == "output"]


def test_a_pulsar_function_output_names_its_input_and_carries_nothing_else() -> None:
    with FunctionHarness(_config()) as harness:
        harness.send("a", key="k", properties={"trace": "t-1"})
        harness.send("b")
        outputs = _outputs(harness)
    assert outputs == [
        ("a!", None, {**ORIGIN_IN, INPUT_MESSAGE_PROPERTY: "0:0"}),
        ("b!", None, {**ORIGIN_IN, INPUT_MESSAGE_PROPERTY: "0:1"}),
    ]


def test_forwarding_turned_on_carries_the_key_and_properties_too() -> None:
    config = _config(forward_source_message_property=True)
    with FunctionHarness(config) as harness:
        harness.send("a", key="k", properties={"trace": "t-1", "ünï": "✓"})
        harness.send("b", properties={})
        # A property of an earlier function's output is replaced, not repeated.
        harness.send("c", properties={INPUT_TOPIC_PROPERTY: "persistent://t/ns/x", "p": "1"})
        outputs = _outputs(harness)
    assert outputs == [
        ("a!", "k", {"trace": "t-1", "ünï": "✓", **ORIGIN_IN, INPUT_MESSAGE_PROPERTY: "0:0"}),
        ("b!", None, {**ORIGIN_IN, INPUT_MESSAGE_PROPERTY: "0:1"}),
        ("c!", None, {"p": "1", **ORIGIN_IN, INPUT_MESSAGE_PROPERTY: "0:2"}),
    ]


def test_a_sparkfn_function_forwards_unless_told_not_to() -> None:
    relay = Path(__file__).resolve().parents[1] / "funcs" / "properties_relay.py"
    with FunctionHarness(_config(relay, classname="properties_relay.process")) as harness:
        harness.send("a", key="k", properties={"trace": "t-1"})
        [forwarded] = _outputs(harness)
    assert forwarded[1] == "k"
    assert forwarded[2]["trace"] == "t-1"
    assert forwarded[2][INPUT_MESSAGE_PROPERTY] == "0:0"
    config = _config(
        relay, classname="properties_relay.process", forward_source_message_property=False
    )
    with FunctionHarness(config) as harness:
        harness.send("a", key="k", properties={"trace": "t-1"})
        [kept] = _outputs(harness)
    assert kept[1] is None
    assert kept[2] == {**ORIGIN_IN, INPUT_MESSAGE_PROPERTY: "0:0"}


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
