"""Bad user code gives a message naming the function and the problem, not a Spark trace.

Code that cannot load fails ``FunctionRun.start`` with :class:`FunctionLoadError`
on the driver, before any query runs. Code that loads but returns values its
output topic cannot take fails per message, as a user exception whose
message names the function, the topic and the problem; the function keeps
running.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.errors import FunctionLoadError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.producer import Producer

FUNCS = Path(__file__).resolve().parents[1] / "funcs"
SPARK_NOISE = ("Traceback", "py4j", "org.apache.spark", "Py4JJavaError", "at java.")


def _name() -> str:
    return f"bad-{uuid.uuid4().hex[:8]}"  # fresh objects in Spark's reused workers


def _topics(store: Store, output_schema: str = "string") -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", partitions=2, schema_type=output_schema)
    producer = Producer(store, "in")
    producer.send_batch(producer.encode(["a", "b", "c", "d"]))


def _assert_clean(message: str) -> None:
    for noise in SPARK_NOISE:
        assert noise not in message, f"{noise!r} in the error message: {message}"


LOAD_ERRORS = {
    "import_error": (
        {"py": "bad_import.py"},
        r"function public/default/{name}: importing bad_import\.py failed: "
        r"ModuleNotFoundError: No module named 'sparkfn_no_such_module'",
    ),
    "wrong_classname": (
        {"py": "bad_shapes.py", "classname": "bad_shapes.Nope"},
        r"function public/default/{name}: classname 'bad_shapes\.Nope': module bad_shapes has "
        r"no 'Nope' \(it defines: .*Exploding.*returns_dict.*\)",
    ),
    "no_process": (
        {"py": "bad_shapes.py"},
        r"function public/default/{name}: no classname given and .*bad_shapes\.py defines no "
        r"'process'",
    ),
    "missing_file": (
        {"py": "no_such_function.py"},
        r"function public/default/{name}: py file '.*no_such_function\.py' does not exist",
    ),
    "wrong_arity": (
        {"py": "bad_shapes.py", "classname": "bad_shapes.three_args"},
        r"function public/default/{name}: 'three_args' must take \(input\) or \(input, context\); "
        r"it takes 3 arguments",
    ),
    "constructor_raises": (
        {"py": "bad_shapes.py", "classname": "bad_shapes.Exploding"},
        r"function public/default/{name}: creating Exploding\(\) failed: RuntimeError: "
        r"no config file",
    ),
    "class_without_process": (
        {"py": "bad_shapes.py", "classname": "bad_shapes.NoProcess"},
        r"function public/default/{name}: (class )?NoProcess has no process\(self, input, context\) "
        r"method",
    ),
    "not_callable": (
        {"py": "bad_shapes.py", "classname": "bad_shapes.NOT_CALLABLE"},
        r"function public/default/{name}: classname 'bad_shapes\.NOT_CALLABLE' is a int, not a "
        r"class or function",
    ),
}


@pytest.mark.parametrize("case", sorted(LOAD_ERRORS))
def test_code_that_cannot_load_fails_start_before_the_query_runs(
    case: str, spark: Any, store: Store
) -> None:
    _topics(store)
    fields, pattern = LOAD_ERRORS[case]
    name = _name()
    code = {k: str(FUNCS / v) if k == "py" else v for k, v in fields.items()}
    config = FunctionConfig.build(
        name=name, inputs=["in"], output="out", subscription_position="earliest", **code
    )
    run = FunctionRun(config, store=store, spark=spark)
    active_before = {q.id for q in spark.streams.active}
    with pytest.raises(FunctionLoadError) as info:
        run.start(until_drained=True)
    message = str(info.value)
    assert re.fullmatch(pattern.format(name=name), message), message
    _assert_clean(message)
    assert run.query is None
    assert {q.id for q in spark.streams.active} == active_before
    status = run.status().instances[0].status
    assert status.state == "ERROR" and status.error == message
    assert status.num_received == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("function", "output_schema", "expected"),
    [
        (
            "returns_dict",
            "string",
            r"function public/default/{name} returned a dict \(\{{'text': '(a|b|c|d)'\}}\) for "
            r"topic public/default/out \(schema string\); expected str or bytes",
        ),
        (
            "returns_set",
            "json",
            r"function public/default/{name} returned a dict for topic public/default/out "
            r"\(json\) that is not JSON-serialisable: Object of type set is not JSON serializable",
        ),
    ],
    ids=["dict_to_string_topic", "set_to_json_topic"],
)
def test_output_the_topic_cannot_take_is_a_user_exception_per_message(
    function: str, output_schema: str, expected: str, spark: Any, store: Store
) -> None:
    _topics(store, output_schema)
    name = _name()
    config = FunctionConfig.build(
        name=name,
        py=str(FUNCS / "bad_shapes.py"),
        classname=f"bad_shapes.{function}",
        inputs=["in"],
        output="out",
        subscription_position="earliest",
    )
    run = FunctionRun(config, store=store, spark=spark)
    run.start(until_drained=True)
    assert run.wait(180), "the function did not drain its input within 180 s"  # no failure

    status = run.status().instances[0].status
    assert status.state == "STOPPED" and status.error == ""
    assert status.num_received == 4
    assert status.num_user_exceptions == 4
    assert status.num_successfully_processed == 0
    assert status.num_system_exceptions == 0
    assert len(status.latest_user_exceptions) == 4
    for exc in status.latest_user_exceptions:
        assert exc.type == "TypeError"
        assert re.fullmatch(expected.format(name=name), exc.message), exc.message
        _assert_clean(exc.message)
        assert re.fullmatch(r"\d+:\d+", exc.message_id)
    assert Consumer(store, "out", initial_position="earliest").receive(100) == []
