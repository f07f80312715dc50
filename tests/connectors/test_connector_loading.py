"""Finding a connector's code: built-ins by name, the user's file and class, and the
errors that say what is wrong."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from connector_probes import finish

from sparkfn.api.errors import ConnectorLoadError
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.connectors.builtin.file_sink import FileSink
from sparkfn.connectors.builtin.generator import GeneratorSource
from sparkfn.connectors.registry import load_sink, load_source
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer

USER_SOURCE = """
from sparkfn import END_OF_STREAM, Record, Source

class Countdown(Source):
    def open(self, config, context):
        self.left = int(config["start"])
        self.prefix = context.get_name()

    def read(self):
        if self.left == 0:
            return END_OF_STREAM
        self.left -= 1
        return Record(f"{self.prefix}:{self.left}")

class NotASource:
    pass
"""


def _source(**fields: Any) -> SourceConfig:
    return SourceConfig(**{"name": "src", "output": "out", **fields})


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_built_ins_by_name_make_a_new_object_each_time() -> None:
    first = load_source(_source(source_type="Generator"))
    second = load_source(_source(source_type="generator"))
    assert isinstance(first, GeneratorSource) and first is not second
    assert isinstance(load_sink(SinkConfig(name="s", sink_type="file", inputs=["in"])), FileSink)


def test_a_user_source_from_its_file_runs_end_to_end(sqlite_store: Store, tmp_path: Path) -> None:
    TopicAdmin(sqlite_store).create("out", schema_type="string")
    py = _file(tmp_path, "countdown_source.py", USER_SOURCE)
    # No classname: the one Source class the file defines.
    config = _source(py=py, configs={"start": 3})
    runner = SourceRunner(config, sqlite_store)
    runner.start()
    finish(runner)
    assert runner.state is SourceState.STOPPED
    got = Consumer(sqlite_store, "out", initial_position="earliest").receive()
    assert [m.value for m in got] == [b"src:2", b"src:1", b"src:0"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"source_type": "kafka"},
            "source public/default/src: source_type 'kafka' is not a built-in source "
            "(known: file, generator, mqtt, nats, postgres, rabbitmq, redis)",
        ),
        (
            {"source_type": "file", "classname": "x.Y"},
            "give source_type (a built-in) or py/classname (your code), not both",
        ),
        ({"py": "/no/such/file.py"}, "py file '/no/such/file.py' does not exist"),
        ({"classname": "countdown_x.Countdown"}, "importing module 'countdown_x' failed"),
    ],
)
def test_load_errors_say_what_is_wrong(fields: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConnectorLoadError) as caught:
        load_source(_source(**fields))
    assert expected in str(caught.value)


def test_user_code_errors_name_the_class(tmp_path: Path) -> None:
    py = _file(tmp_path, "countdown_bad.py", USER_SOURCE)
    with pytest.raises(ConnectorLoadError, match="NotASource must subclass sparkfn.Source"):
        load_source(_source(py=py, classname="NotASource"))
    with pytest.raises(ConnectorLoadError, match=r"has no 'Nope' \(it defines: .*Countdown"):
        load_source(_source(py=py, classname="countdown_bad.Nope"))

    two = _file(tmp_path, "two_sources.py", USER_SOURCE + "\nclass Other(Countdown):\n    pass\n")
    with pytest.raises(ConnectorLoadError, match=r"defines 2 Source classes \(Countdown, Other\)"):
        load_source(_source(py=two))

    abstract = _file(
        tmp_path,
        "abstract_source.py",
        "from sparkfn import Source\nclass Half(Source):\n    pass\n",
    )
    with pytest.raises(ConnectorLoadError, match="Half does not implement read"):
        load_source(_source(py=abstract, classname="Half"))
