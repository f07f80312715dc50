"""Topics created on first use, as Pulsar's allowAutoTopicCreation (issue 29, point 1).

The store's setting on both stores; a function's topics (inputs, output, log
and dead-letter topics) created by the check every start makes, with the
store's partitions and schema type; off (in the store or for the function),
a missing topic is the error it always was. No Spark: the check loads the
code, it does not run it. The CLI's side is tests/cli/test_topic_creation_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkfn.api.errors import ConfigError, TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.query.build import validate
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.autocreate import TopicCreation, ensure_topic
from sparkfn.topics.message import SchemaType

EXCLAMATION = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"


def _config(**fields: object) -> FunctionConfig:
    base: dict[str, object] = {
        "name": "shout",
        "py": str(EXCLAMATION),
        "inputs": ["persistent://public/default/raw"],
        "output": "persistent://public/default/shouted",
        "log_topic": "acme/ops/shout-log",
        "dead_letter_topic": "shout-dead",
        "max_message_retries": 1,  # a dead-letter topic needs a limit, as in Pulsar
    }
    return FunctionConfig.build(**{**base, **fields})


def _names(store: Store) -> list[str]:
    return sorted(str(t.name) for t in TopicAdmin(store).list())


def test_the_setting_is_on_by_default_and_kept_in_the_store(store: Store) -> None:
    assert TopicCreation.read(store) == TopicCreation(True, 1, SchemaType.BYTES)
    changed = TopicCreation.write(store, partitions=3, schema_type="string")
    assert changed == TopicCreation(True, 3, SchemaType.STRING)
    assert TopicCreation.write(store, enabled=False) == TopicCreation(False, 3, SchemaType.STRING)
    again = Store.open(url=store.url, data_dir=store.data_dir)  # another process's view
    try:
        assert TopicCreation.read(again) == TopicCreation(False, 3, SchemaType.STRING)
    finally:
        again.close()


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"partitions": 0}, "auto_topic_partitions must be between 1 and 1024; got 0"),
        ({"schema_type": "avro"}, "cannot be avro"),
        ({"schema_type": "xml"}, "schema_type 'xml' is not one of"),
    ],
)
def test_a_bad_setting_is_refused_by_name(
    store: Store, given: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        TopicCreation.write(store, **given)  # type: ignore[arg-type]
    assert TopicCreation.read(store) == TopicCreation()


def test_ensure_topic_creates_with_the_defaults_or_refuses(store: Store) -> None:
    creation = TopicCreation(True, 2, SchemaType.STRING)
    made = ensure_topic(store, "fresh", creation)
    assert (str(made.name), made.partitions, made.schema_type) == (
        "public/default/fresh",
        2,
        SchemaType.STRING,
    )
    assert ensure_topic(store, "fresh", TopicCreation(False)).id == made.id  # exists: kept
    with pytest.raises(TopicNotFoundError):
        ensure_topic(store, "other", TopicCreation(False))
    assert _names(store) == ["public/default/fresh"]


def test_a_functions_topics_are_created_by_its_check(store: Store) -> None:
    TopicCreation.write(store, partitions=2, schema_type="string")
    assert validate(store, _config()) == ["public/default/raw"]
    assert _names(store) == [
        "acme/ops/shout-log",
        "public/default/raw",
        "public/default/shout-dead",
        "public/default/shouted",
    ]
    for info in TopicAdmin(store).list():
        assert (info.partitions, info.schema_type) == (2, SchemaType.STRING)


@pytest.mark.parametrize("off", ["store", "function"])
def test_off_a_missing_topic_is_an_error_naming_it(store: Store, off: str) -> None:
    if off == "store":
        TopicCreation.write(store, enabled=False)
        config = _config()
    else:
        config = _config(auto_create_topics=False)
    with pytest.raises(ConfigError) as refused:
        validate(store, config)
    assert str(refused.value) == (
        "function public/default/shout: inputs topic public/default/raw does not exist; "
        "create it first (topics are not created on first use here)"
    )
    assert _names(store) == []


def test_code_that_does_not_load_creates_no_topic(store: Store, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def process(x)\n")
    with pytest.raises(Exception, match="broken.py"):
        validate(store, _config(py=str(broken)))
    assert _names(store) == []
