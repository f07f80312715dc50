"""The built-in file source: JSON lines and CSV, resuming after a restart, watching a
directory, splitting files over instances, and effectively-once after lost progress."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from connector_probes import finish, wait_until

from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.connectors.source.source_context import source_state_dir
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import ReceivedMessage


def _config(**configs: Any) -> SourceConfig:
    fields = {
        k: configs.pop(k)
        for k in ("parallelism", "processing_guarantees", "batch_size")
        if k in configs
    }
    return SourceConfig(name="files", source_type="file", output="raw", configs=configs, **fields)


def _run(store: Store, **configs: Any) -> SourceRunner:
    runner = SourceRunner(_config(**configs), store)
    runner.start()
    finish(runner)
    return runner


def _messages(store: Store) -> list[ReceivedMessage]:
    return Consumer(store, "raw", initial_position="earliest").receive(max_messages=100_000)


def _values(store: Store) -> list[str]:
    return [m.value.decode() for m in _messages(store) if m.value is not None]


def _write(path: Path, text: str, mode: str = "w") -> None:
    with path.open(mode) as handle:
        handle.write(text)


def _jsonl(path: Path, first: int, last: int, mode: str = "w") -> None:
    _write(
        path,
        "".join(json.dumps({"n": i, "user": f"u{i % 3}"}) + "\n" for i in range(first, last)),
        mode,
    )


def test_jsonl_directory_is_read_in_name_order_and_resumes_without_duplicates(
    store: Store, tmp_path: Path
) -> None:
    TopicAdmin(store).create("raw", schema_type="json")
    inbox = tmp_path / "in"
    inbox.mkdir()
    _jsonl(inbox / "b.jsonl", 3, 5)
    _jsonl(inbox / "a.jsonl", 0, 3)
    _write(inbox / "notes.txt", "not matched by the glob\n")
    _write(inbox / ".hidden.jsonl", '{"n": -1}\n')

    first = _run(store, path=str(inbox), glob="*.jsonl", key_field="user")
    assert first.state is SourceState.STOPPED  # the end of the files is a drain
    messages = _messages(store)
    assert [json.loads(m.value or b"")["n"] for m in messages] == [0, 1, 2, 3, 4]
    assert [m.key for m in messages] == ["u0", "u1", "u2", "u0", "u1"]
    # The value is the line as written.
    assert messages[0].value == json.dumps({"n": 0, "user": "u0"}).encode()
    assert messages[0].sequence_id == 1  # its line number

    # More lines in one file, a new file: a restart appends only those.
    _jsonl(inbox / "a.jsonl", 100, 102, mode="a")
    _jsonl(inbox / "c.jsonl", 200, 201)
    second = _run(store, path=str(inbox), glob="*.jsonl", key_field="user")
    assert second.stats.appended == 3
    assert [json.loads(v)["n"] for v in _values(store)] == [0, 1, 2, 3, 4, 100, 101, 200]

    third = _run(store, path=str(inbox), glob="*.jsonl")
    assert third.stats.received == 0
    progress = source_state_dir(store.data_dir, _config(path="x")) / "file-progress-0.json"
    files = json.loads(progress.read_text())["files"]
    assert files[str(inbox / "a.jsonl")]["line"] == 5


def test_csv_rows_become_json_objects_with_quoted_newlines_and_a_key_column(
    store: Store, tmp_path: Path
) -> None:
    TopicAdmin(store).create("raw", schema_type="json")
    table = tmp_path / "orders.csv"
    _write(
        table,
        'id;customer;note\n1;alice;"first; with ""quotes"""\n2;bob;"two\nlines"\n\n3;carol;\n',
    )
    _run(store, path=str(table), format="CSV", delimiter=";", key_field="customer")
    messages = _messages(store)
    assert [json.loads(m.value or b"") for m in messages] == [
        {"id": "1", "customer": "alice", "note": 'first; with "quotes"'},
        {"id": "2", "customer": "bob", "note": "two\nlines"},
        {"id": "3", "customer": "carol", "note": ""},
    ]
    assert [m.key for m in messages] == ["alice", "bob", "carol"]
    assert [m.sequence_id for m in messages] == [2, 3, 6]  # the line each row starts on

    # Resuming a csv file re-reads its header, then goes on after the last row.
    _write(table, "4;dave;later\n", mode="a")
    _run(store, path=str(table), format="csv", delimiter=";", key_field="customer")
    assert json.loads(_values(store)[-1]) == {"id": "4", "customer": "dave", "note": "later"}
    assert len(_values(store)) == 4


def test_csv_without_header_gives_arrays(store: Store, tmp_path: Path) -> None:
    TopicAdmin(store).create("raw", schema_type="string")
    table = tmp_path / "plain.csv"
    _write(table, "a,b\nc,d")  # the last line has no newline: read all the same
    _run(store, path=str(table), format="csv", header=False)
    assert [json.loads(v) for v in _values(store)] == [["a", "b"], ["c", "d"]]


def test_files_are_split_over_instances_and_each_line_is_appended_once(
    store: Store, tmp_path: Path
) -> None:
    TopicAdmin(store).create("raw", partitions=2, schema_type="json")
    inbox = tmp_path / "in"
    inbox.mkdir()
    # A file belongs to instance crc32(path) % 3, and the path holds pytest's
    # temporary directory: six files can all fall on one instance (0.4 % of
    # runs), so more are named until at least two instances own some.
    names: list[Path] = []
    while len(names) < 6 or len({_owner(p, 3) for p in names}) < 2:
        names.append(inbox / f"part-{len(names)}.jsonl")
    for f, path in enumerate(names):
        _jsonl(path, f * 10, f * 10 + 10)
    group = SourceInstances(_config(path=str(inbox), parallelism=3), store)
    group.start()
    assert group.wait(30) and group.join(30)
    assert group.state is SourceState.STOPPED
    assert sorted(json.loads(v)["n"] for v in _values(store)) == list(range(10 * len(names)))
    appended = {r.instance_id: r.stats.appended for r in group.runners if r.stats.appended}
    assert appended == {  # each file read by its owner only: the work was shared
        owner: 10 * sum(1 for p in names if _owner(p, 3) == owner)
        for owner in {_owner(p, 3) for p in names}
    }


def _owner(path: Path, instances: int) -> int:
    return zlib.crc32(str(path).encode()) % instances


def test_effectively_once_drops_lines_appended_before_the_progress_was_lost(
    store: Store, tmp_path: Path
) -> None:
    TopicAdmin(store).create("raw", partitions=3, schema_type="json")
    inbox = tmp_path / "in"
    inbox.mkdir()
    _jsonl(inbox / "a.jsonl", 0, 20)
    _jsonl(inbox / "b.jsonl", 20, 30)
    settings = {"path": str(inbox), "processing_guarantees": "effectively_once", "batch_size": 7}
    _run(store, **settings)
    assert len(_values(store)) == 30

    # A crash between an append and the commit() that records the progress
    # reads those lines again: here all of them.
    for progress in source_state_dir(store.data_dir, _config(path="x")).glob("*.json"):
        progress.unlink()
    _jsonl(inbox / "a.jsonl", 100, 105, mode="a")
    again = _run(store, **settings)

    assert (again.stats.deduplicated, again.stats.appended) == (30, 5)
    assert sorted(json.loads(v)["n"] for v in _values(store)) == [*range(30), *range(100, 105)]


def test_watch_waits_for_new_files_and_for_lines_to_be_complete(
    store: Store, tmp_path: Path
) -> None:
    TopicAdmin(store).create("raw", schema_type="json")
    inbox = tmp_path / "in"
    inbox.mkdir()
    runner = SourceRunner(
        _config(path=str(inbox), watch=True).model_copy(update={"poll_interval": 0.01}), store
    )
    runner.start()
    try:
        _write(inbox / "a.jsonl", '{"n": 1}\n{"n": ')
        wait_until(lambda: runner.stats.appended == 1, "the complete line")
        _write(inbox / "a.jsonl", "2}\n", mode="a")
        _jsonl(inbox / "b.jsonl", 3, 4)
        wait_until(lambda: runner.stats.appended == 3, "the completed line and the new file")
        assert runner.state is SourceState.RUNNING  # watching does not end by itself
    finally:
        runner.stop("drain")
        finish(runner)
    assert [json.loads(v)["n"] for v in _values(store)] == [1, 2, 3]


def test_a_bad_line_kills_the_instance_naming_the_file_and_line(
    sqlite_store: Store, tmp_path: Path
) -> None:
    TopicAdmin(sqlite_store).create("raw", schema_type="json")
    bad = tmp_path / "bad.jsonl"
    _write(bad, '{"n": 1}\n{"n": oops}\n')
    runner = _run(sqlite_store, path=str(bad))
    assert runner.state is SourceState.ERROR
    assert runner.death is not None
    assert runner.death.type == "ValueError"
    assert f"{bad}:2: not valid JSON" in runner.death.message


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({}, "configs.path: required"),
        ({"path": "/nowhere/at/all"}, "configs.path '/nowhere/at/all' does not exist"),
        (
            {"path": "/", "format": "xml"},
            "configs.format: Input should be 'jsonl' or 'csv' (got 'xml')",
        ),
        ({"path": "/", "delimter": ";"}, "configs.delimter: unknown setting"),
        (
            {"path": "/", "format": "csv", "header": False, "key_field": "id"},
            "configs.key_field 'id' needs configs.header true",
        ),
    ],
)
def test_bad_configs_name_the_source_the_field_and_the_value(
    sqlite_store: Store, configs: dict[str, Any], expected: str
) -> None:
    TopicAdmin(sqlite_store).create("raw")
    runner = _run(sqlite_store, **configs)
    assert runner.death is not None and runner.death.type == "ConfigError"
    assert runner.death.message.startswith("source public/default/files (file): ")
    assert expected in runner.death.message
