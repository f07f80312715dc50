"""``sparkfn topics``: the installed command run as a child process.

Happy paths on SQLite (and once on PostgreSQL), then every kind of bad input:
each must end with a non-zero exit code and one ``error [reason]: ...`` line
that names the offending value, never a traceback.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, get_args

import pytest
from cli_runner import Cli, Result, cli_env

from waiting import until

WAIT_SECONDS = 60.0


def _json_lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.lines]


def _values(result: Result) -> list[Any]:
    return [m["value"] for m in _json_lines(result)]


# --- help and startup -------------------------------------------------------


def test_help_shows_the_global_options_and_their_environment_variables(cli: Cli) -> None:
    result = cli.ok("--help")
    for text in ("--data-dir", "SPARKFN_DATA_DIR", "--store-url", "SPARKFN_STORE_URL", "topics"):
        assert text in result.stdout
    commands = cli.ok("topics", "--help").stdout
    for command in (
        "create",
        "list",
        "describe",
        "delete",
        "unsubscribe",
        "produce",
        "consume",
        "maintain",
    ):
        assert command in commands


def test_schema_type_choices_match_the_library() -> None:
    from sparkfn.cli.topics import SchemaTypeName
    from sparkfn.topics.message import SchemaType

    assert set(get_args(SchemaTypeName)) == {t.value for t in SchemaType}


def test_topic_commands_do_not_import_pyspark(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    cli.ok("topics", "produce", "t", "-m", "x")
    for args in (["topics", "--help"], ["topics", "consume", "t", "--json"]):
        done = subprocess.run(
            [*cli.command([])[:1], "-X", "importtime", *cli.command(args)[1:]],
            capture_output=True,
            env=cli.env,
            timeout=WAIT_SECONDS,
            check=True,
        )
        imported = done.stderr.decode()
        assert "sparkfn.cli.topics" in imported
        assert "pyspark" not in imported, f"sparkfn {' '.join(args)} imported pyspark"


# --- create, list, describe, delete -----------------------------------------


def test_create_list_and_describe(cli: Cli) -> None:
    created = cli.ok(
        "topics",
        "create",
        "orders",
        "--partitions",
        "3",
        "--schema-type",
        "json",
        "--retention",
        "7d",
        "--retention-size",
        "1GB",
    )
    assert "public/default/orders" in created.stdout
    cli.ok("topics", "create", "persistent://acme/sales/raw", "-p", "1")

    listed = json.loads(cli.ok("topics", "list", "--json").stdout)
    assert [t["topic"] for t in listed] == ["acme/sales/raw", "public/default/orders"]
    orders = listed[1]
    assert orders["partitions"] == 3
    assert orders["schema_type"] == "json"
    assert orders["retention_ms"] == 7 * 24 * 3600 * 1000
    assert orders["retention_bytes"] == 1 << 30
    assert listed[0]["schema_type"] == "bytes"

    table = cli.ok("topics", "list").stdout
    assert "public/default/orders" in table and "7d" in table and "1GB" in table
    only_acme = json.loads(cli.ok("topics", "list", "--tenant", "acme", "--json").stdout)
    assert [t["topic"] for t in only_acme] == ["acme/sales/raw"]
    assert json.loads(cli.ok("topics", "list", "--namespace", "nothing", "--json").stdout) == []

    cli.ok("topics", "produce", "orders", "-m", '{"n": 1}', "-m", '{"n": 2}', "--partition", "1")
    described = json.loads(cli.ok("topics", "describe", "orders", "--json").stdout)
    assert described["topic"] == "public/default/orders"
    assert described["messages"] == 2
    assert described["segments"] == 1
    assert described["size_bytes"] > 0
    assert [
        (p["partition"], p["start_offset"], p["end_offset"], p["messages"])
        for p in described["partition_stats"]
    ] == [(0, 0, 0, 0), (1, 0, 2, 2), (2, 0, 0, 0)]

    text = cli.ok("topics", "describe", "orders").stdout
    for expected in ("public/default/orders", "json", "7d", "1GB", "PARTITION", "MESSAGES"):
        assert expected in text


def test_global_options_override_the_environment(cli: Cli, tmp_path: Path) -> None:
    cli.ok("topics", "create", "here")
    other = tmp_path / "other"
    assert json.loads(cli.ok("--data-dir", str(other), "topics", "list", "--json").stdout) == []
    url = f"sqlite:///{other / 'elsewhere.db'}"
    cli.ok("--store-url", url, "topics", "create", "there")
    names = json.loads(cli.ok("--store-url", url, "topics", "list", "--json").stdout)
    assert [t["topic"] for t in names] == ["public/default/there"]
    assert (other / "elsewhere.db").exists()


def test_delete_with_yes(cli: Cli) -> None:
    cli.ok("topics", "create", "doomed")
    cli.ok("topics", "produce", "doomed", "-m", "x")
    assert (
        "deleted topic public/default/doomed"
        in cli.ok("topics", "delete", "doomed", "--yes").stdout
    )
    assert json.loads(cli.ok("topics", "list", "--json").stdout) == []
    cli.fail("topics", "describe", "doomed")


def test_delete_without_yes_needs_a_terminal(cli: Cli) -> None:
    cli.ok("topics", "create", "kept")
    result = cli.fail("topics", "delete", "kept")
    assert "error [confirmation_required]" in result.stderr
    assert "--yes" in result.stderr
    cli.ok("topics", "describe", "kept")


@pytest.mark.parametrize(("answer", "deleted"), [(b"y\n", True), (b"n\n", False)])
def test_delete_asks_on_a_terminal(cli: Cli, answer: bytes, deleted: bool) -> None:
    cli.ok("topics", "create", "asked")
    controller, terminal = pty.openpty()
    try:
        proc = cli.popen(
            "topics",
            "delete",
            "asked",
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.write(controller, answer)
        out, err = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        os.close(terminal)
        os.close(controller)
    assert b"Delete topic public/default/asked" in out
    assert b"Traceback" not in err
    assert proc.returncode == (0 if deleted else 1), err
    exists = cli.run("topics", "describe", "asked").code == 0
    assert exists is not deleted


# --- produce -----------------------------------------------------------------


def test_produce_messages_with_key_properties_and_event_time(cli: Cli) -> None:
    cli.ok("topics", "create", "events", "--schema-type", "json", "-p", "2")
    produced = cli.ok(
        "topics",
        "produce",
        "events",
        "-m",
        '{"id": 1}',
        "--message",
        '{"id": 2}',
        "--key",
        "alice",
        "--property",
        "source=test",
        "--property",
        "expr=a=b",
        "--event-time",
        "2024-05-01T12:00:00+02:00",
    )
    ids = produced.lines
    assert len(ids) == 2
    partition = ids[0].split(":")[0]
    assert ids == [f"{partition}:0", f"{partition}:1"]  # one key, one partition
    assert "produced 2 message(s) to public/default/events" in produced.stderr

    messages = _json_lines(cli.ok("topics", "consume", "events", "--json"))
    assert [m["message_id"] for m in messages] == ids
    assert [m["value"] for m in messages] == [{"id": 1}, {"id": 2}]
    for m in messages:
        assert m["topic"] == "public/default/events"
        assert m["key"] == "alice"
        assert m["properties"] == {"source": "test", "expr": "a=b"}
        assert m["event_time"] == "2024-05-01T10:00:00+00:00"


def test_produce_from_a_file_and_from_stdin(cli: Cli, tmp_path: Path) -> None:
    cli.ok("topics", "create", "lines", "--schema-type", "string")
    path = tmp_path / "lines.txt"
    path.write_text("first\n\nsecond\r\nthird")
    assert cli.ok("topics", "produce", "lines", "--file", str(path)).lines == ["0:0", "0:1", "0:2"]
    piped = cli.ok("topics", "produce", "lines", "--file", "-", stdin="fourth\nfünfte\n".encode())
    assert piped.lines == ["0:3", "0:4"]
    values = _values(cli.ok("topics", "consume", "lines", "--json"))
    assert values == ["first", "second", "third", "fourth", "fünfte"]


def test_bytes_topics_take_any_bytes(cli: Cli, tmp_path: Path) -> None:
    cli.ok("topics", "create", "raw")
    path = tmp_path / "raw.bin"
    path.write_bytes(b"\xff\xfe\x00\nplain\n")
    cli.ok("topics", "produce", "raw", "--file", str(path))
    # Valid UTF-8 is shown as its text, as Pulsar's consumer prints it; other bytes in hex.
    messages = _json_lines(cli.ok("topics", "consume", "raw", "--json"))
    assert [(m["value"], m["value_encoding"]) for m in messages] == [
        ("fffe00", "hex"),
        ("plain", "text"),
    ]
    table = cli.ok("topics", "consume", "raw").stdout
    assert "0xfffe00" in table and "plain" in table


def test_produce_to_a_partition_and_deduplicate_by_producer(cli: Cli) -> None:
    cli.ok("topics", "create", "dedup", "-p", "4")
    first = cli.ok(
        "topics", "produce", "dedup", "-m", "a", "-m", "b",
        "--producer", "p1", "--sequence-id", "10", "--partition", "3",
    )  # fmt: skip
    assert first.lines == ["3:0", "3:1"]
    # Sequence ids 10, 11, 12: the first two were seen, only 12 is appended.
    again = cli.ok(
        "topics", "produce", "dedup", "-m", "a", "-m", "b", "-m", "c",
        "--producer", "p1", "--sequence-id", "10", "--partition", "3", "--json",
    )  # fmt: skip
    assert json.loads(again.stdout) == [None, None, "3:2"]
    assert "dropped 2 duplicate(s)" in again.stderr
    messages = _json_lines(cli.ok("topics", "consume", "dedup", "--json"))
    assert [(m["value"], m["producer"], m["sequence_id"]) for m in messages] == [
        ("a", "p1", 10),
        ("b", "p1", 11),
        ("c", "p1", 12),
    ]


# --- consume -------------------------------------------------------------------


def _topic_with(cli: Cli, name: str, values: list[str]) -> None:
    cli.ok("topics", "create", name, "--schema-type", "string")
    args = [arg for value in values for arg in ("-m", value)]
    cli.ok("topics", "produce", name, *args)


def test_consume_positions_and_limits(cli: Cli) -> None:
    _topic_with(cli, "seq", ["a", "b", "c"])
    assert _values(cli.ok("topics", "consume", "seq", "--json")) == ["a", "b", "c"]
    assert _values(cli.ok("topics", "consume", "seq", "--json", "-n", "2")) == ["a", "b"]
    latest = cli.ok("topics", "consume", "seq", "--json", "--position", "latest")
    assert latest.lines == []
    table = cli.ok("topics", "consume", "seq").stdout
    for expected in ("ID", "VALUE", "0:0", "0:2", "c"):
        assert expected in table


def test_subscription_resumes_after_what_it_printed(cli: Cli) -> None:
    _topic_with(cli, "resume", ["m1", "m2", "m3", "m4", "m5"])
    sub = ["topics", "consume", "resume", "--subscription", "audit", "--json", "-p", "Earliest"]
    assert _values(cli.ok(*sub, "-n", "2")) == ["m1", "m2"]
    assert _values(cli.ok(*sub, "-n", "2")) == ["m3", "m4"]
    cli.ok("topics", "produce", "resume", "-m", "m6")
    assert _values(cli.ok(*sub)) == ["m5", "m6"]
    assert cli.ok(*sub).lines == []
    # Another subscription and a plain reader are independent of it.
    other = ["topics", "consume", "resume", "-s", "other", "--json", "-n", "1", "-p", "Earliest"]
    assert _values(cli.ok(*other)) == ["m1"]
    assert len(cli.ok("topics", "consume", "resume", "--json").lines) == 6


def test_a_new_subscription_at_latest_sees_only_new_messages(cli: Cli) -> None:
    _topic_with(cli, "late", ["old"])
    sub = ["topics", "consume", "late", "-s", "tail", "--position", "latest", "--json"]
    assert cli.ok(*sub).lines == []
    cli.ok("topics", "produce", "late", "-m", "new")
    assert _values(cli.ok(*sub)) == ["new"]


def test_produce_takes_pulsar_clients_flags(cli: Cli, tmp_path: Path) -> None:
    # pulsar-client produce: -m splits on commas (-s another separator), -p k=v,k=v,
    # -f a file per message, -vs the value schema.
    cli.ok("topics", "produce", "split", "-m", "a,b", "-vs", "string", "-p", "k1=v1,k2=v2")
    cli.ok("topics", "produce", "split", "-m", "c|d,e", "-s", "|")
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    first.write_text('{"a": 1,\n "b": 2}\n')
    second.write_text("second")
    cli.ok("topics", "produce", "split", "-f", f"{first},{second}")
    messages = _json_lines(cli.ok("topics", "consume", "split", "--json"))
    assert [m["value"] for m in messages] == ["a", "b", "c", "d,e", first.read_text(), "second"]
    assert messages[0]["properties"] == {"k1": "v1", "k2": "v2"}
    described = json.loads(cli.ok("topics", "describe", "split", "--json").stdout)
    assert described["schema_type"] == "string"  # made on first use with -vs's type


def test_a_partition_by_its_pulsar_name_is_that_partition_of_the_topic(cli: Cli) -> None:
    # consume ...-partition-0 created an empty topic of that name instead.
    cli.ok("topics", "create", "part1", "--schema-type", "string", "-p", "3")
    one = "persistent://public/default/part1-partition-1"
    assert cli.ok("topics", "produce", one, "-m", "a,b").lines == ["1:0", "1:1"]
    cli.ok("topics", "produce", "part1", "-m", "c", "--partition", "2")
    read = _json_lines(cli.ok("topics", "consume", one, "--json"))
    assert [(m["message_id"], m["value"]) for m in read] == [("1:0", "a"), ("1:1", "b")]
    assert cli.ok("topics", "consume", "part1-partition-0", "--json").lines == []
    listed = cli.ok("topics", "list", "--json").stdout
    assert "part1-partition" not in listed, listed
    missing = cli.fail("topics", "consume", "part1-partition-3")
    assert "part1 has 3 partition(s), 0 to 2; there is no partition 3" in missing.stderr


def test_a_new_subscription_starts_at_latest_unless_earliest_as_pulsars(cli: Cli) -> None:
    _topic_with(cli, "history", ["old"])
    assert cli.ok("topics", "consume", "history", "-s", "new-sub", "--json").lines == []
    early = cli.ok("topics", "consume", "history", "-s", "early", "-p", "Earliest", "--json")
    assert _values(early) == ["old"]


def test_consume_n_waits_for_its_messages_and_returns_once_they_came(cli: Cli) -> None:
    cli.ok("topics", "create", "waited", "--schema-type", "string")
    proc = cli.popen(
        "topics", "consume", "waited", "-s", "sub", "-n", "1", "--json",
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:

        def subscribed() -> bool:  # at latest: subscribed before the send
            assert proc.poll() is None, proc.communicate()
            return _subscribed_to(cli, "waited", "sub")

        until(subscribed, "consume to subscribe sub to waited", WAIT_SECONDS, every=0.2)
        assert proc.poll() is None  # nothing came yet: it waits, as Pulsar's
        cli.ok("topics", "produce", "waited", "-m", "first", "-m", "second")
        out, err = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert [json.loads(line)["value"] for line in out.splitlines()] == ["first"]


def _subscribed_to(cli: Cli, topic: str, subscription: str) -> bool:
    from sparkfn.store.store import Store
    from sparkfn.topics.admin import TopicAdmin

    store = Store.open(data_dir=cli.env["SPARKFN_DATA_DIR"])
    try:
        return subscription in TopicAdmin(store).subscriptions(topic)
    finally:
        store.close()


def _line_reader(stream: Any) -> queue.Queue[bytes]:
    lines: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in iter(stream.readline, b""):
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_follow_prints_new_messages_and_ends_cleanly_on_ctrl_c(cli: Cli) -> None:
    _topic_with(cli, "live", ["before"])
    proc = cli.popen(
        "topics", "consume", "live", "-f", "--json", "-s", "watcher", "-p", "Earliest",
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        lines = _line_reader(proc.stdout)
        assert json.loads(lines.get(timeout=WAIT_SECONDS))["value"] == "before"
        cli.ok("topics", "produce", "live", "-m", "during")
        assert json.loads(lines.get(timeout=WAIT_SECONDS))["value"] == "during"
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert code == 0, err
    assert "Traceback" not in err
    # Both printed batches were acknowledged: the subscription has nothing left.
    assert cli.ok("topics", "consume", "live", "-s", "watcher", "--json").lines == []


def test_follow_stops_after_num_messages(cli: Cli) -> None:
    _topic_with(cli, "capped", ["a"])
    proc = cli.popen(
        "topics", "consume", "capped", "-f", "-n", "2", "--json",
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        cli.ok("topics", "produce", "capped", "-m", "b", "-m", "c")
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert [json.loads(line)["value"] for line in out.splitlines()] == ["a", "b"]


def test_a_closed_pipe_ends_consume_without_a_traceback(cli: Cli) -> None:
    _topic_with(cli, "piped", [f"m{i}" for i in range(3000)])
    proc = cli.popen(
        "topics", "consume", "piped", "--json",
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=WAIT_SECONDS)
    assert json.loads(first)["value"] == "m0"
    assert code != 0
    assert "Traceback" not in err


# --- maintenance -----------------------------------------------------------------


def test_maintain_compacts_small_segments(cli: Cli) -> None:
    cli.ok("topics", "create", "small")
    for value in ("a", "b", "c"):
        cli.ok("topics", "produce", "small", "-m", value)
    assert json.loads(cli.ok("topics", "describe", "small", "--json").stdout)["segments"] == 3
    report = json.loads(cli.ok("topics", "maintain", "--json").stdout)
    assert report["segments_merged"] == 3
    assert report["segments_written"] == 1
    assert json.loads(cli.ok("topics", "describe", "small", "--json").stdout)["segments"] == 1
    assert _values(cli.ok("topics", "consume", "small", "--json")) == ["a", "b", "c"]
    assert "segments merged" in cli.ok("topics", "maintain").stdout


# --- unsubscribe -------------------------------------------------------------------


def test_unsubscribe_deletes_the_subscription_and_a_consumer_starts_over(cli: Cli) -> None:
    _topic_with(cli, "unsub", ["m1", "m2", "m3"])
    sub = ["topics", "consume", "unsub", "-s", "audit", "--json", "-p", "Earliest"]
    assert _values(cli.ok(*sub, "-n", "2")) == ["m1", "m2"]
    done = cli.ok("topics", "unsubscribe", "unsub", "--subscription", "audit")
    assert "unsubscribed audit from topic public/default/unsub (1 cursor(s) removed)" in done.stdout
    again = cli.fail("topics", "unsubscribe", "unsub", "-s", "audit")
    assert again.stderr.startswith(
        "error [subscription_not_found]: topic public/default/unsub has no subscription 'audit'"
    ), again.describe()
    assert _values(cli.ok(*sub, "-n", "1")) == ["m1"]


def _claimed_by_a_running_function(
    store_url: str, data_dir: Path, topics: list[str], fqfn: str
) -> None:
    """What a function's run leaves in the store: its subscription's cursors and claim, RUNNING."""
    from sparkfn.runtime.lifecycle import control
    from sparkfn.store.store import Store
    from sparkfn.topics import subscription
    from sparkfn.topics.admin import TopicAdmin

    store = Store.open(store_url, data_dir)
    try:
        infos = [TopicAdmin(store).get(topic) for topic in topics]
        with store.write() as conn:
            subscription.ensure(conn, fqfn, infos, "earliest")
            subscription.claim(conn, fqfn, fqfn)
        control.begin_run(store, fqfn, "function", 1, "started")
        control.set_state(store, fqfn, control.RUNNING, "test")
    finally:
        store.close()


def _unsubscribe_a_running_functions_subscription(
    cli: Cli, store_url: str, data_dir: Path, prefix: str
) -> None:
    a, b, fqfn = f"{prefix}-a", f"{prefix}-b", f"public/default/{prefix}-f"
    for topic in (a, b):
        cli.ok("topics", "create", topic, "-p", "2")
    _claimed_by_a_running_function(store_url, data_dir, [a, b], fqfn)

    busy = cli.fail("topics", "unsubscribe", a, "-s", fqfn)
    assert busy.stderr.startswith(
        f"error [subscription_busy]: subscription '{fqfn}' of topic public/default/{a} "
        f"is read by function {fqfn}, which is RUNNING"
    ), busy.describe()
    assert busy.code == 1
    forced = cli.ok("topics", "unsubscribe", a, "-s", fqfn, "--force")
    assert f"from topic public/default/{a} (2 cursor(s) removed)" in forced.stdout
    # Topic b's cursors stayed: only they are left to remove.
    cli.fail("topics", "unsubscribe", a, "-s", fqfn, "-f")
    assert "(2 cursor(s) removed)" in cli.ok("topics", "unsubscribe", b, "-s", fqfn, "-f").stdout


def test_unsubscribe_refuses_a_running_functions_subscription_unless_forced(
    cli: Cli, data_dir: Path
) -> None:
    url = f"sqlite:///{data_dir.resolve() / 'sparkfn.db'}"
    _unsubscribe_a_running_functions_subscription(cli, url, data_dir, "live")


def test_unsubscribe_on_postgresql(pg_cli: Cli, pg_url: str, data_dir: Path) -> None:
    prefix = f"pg-{uuid.uuid4().hex[:12]}"
    _unsubscribe_a_running_functions_subscription(pg_cli, pg_url, data_dir, prefix)


# --- errors ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def error_cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """One store for all error cases: they must not change it."""
    cli = Cli(cli_env(tmp_path_factory.mktemp("errors")))
    cli.ok("topics", "create", "orders", "--schema-type", "json", "-p", "2")
    cli.ok("topics", "create", "text", "--schema-type", "string")
    return cli


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad-files")
    (folder / "not-json.txt").write_bytes(b'{"ok": 1}\nnot json\n')
    (folder / "not-utf8.txt").write_bytes(b"fine\n\xff\xfe broken\n")
    return folder


ERROR_CASES: list[tuple[str, list[str], str, list[str]]] = [
    # (id, args, reason, text the message must contain)
    ("bad-topic-name-parts", ["create", "a/b"], "invalid_config", ["'a/b'", "2 parts"]),
    ("bad-topic-name-chars", ["create", "bad!name"], "invalid_config", ["'bad!name'"]),
    ("topic-exists", ["create", "orders"], "topic_exists", ["public/default/orders"]),
    ("zero-partitions", ["create", "t", "-p", "0"], "invalid_config", ["partitions", "got 0"]),
    (
        "negative-partitions",
        ["create", "t", "--partitions", "-1"],
        "invalid_config",
        ["partitions", "got -1"],
    ),
    ("partitions-not-a-number", ["create", "t", "-p", "many"], "usage_error", ["--partitions"]),
    (
        "unknown-schema-type",
        ["create", "t", "--schema-type", "protobuf"],
        "usage_error",
        ["--schema-type", "'protobuf'"],
    ),
    ("bad-retention", ["create", "t", "--retention", "7x"], "usage_error", ["--retention", "'7x'"]),
    ("zero-retention", ["create", "t", "--retention", "0s"], "usage_error", ["'0s'", "positive"]),
    (
        "bad-retention-size",
        ["create", "t", "--retention-size", "huge"],
        "usage_error",
        ["--retention-size", "'huge'"],
    ),
    ("describe-unknown", ["describe", "nope"], "topic_not_found", ["public/default/nope"]),
    ("delete-unknown", ["delete", "nope", "--yes"], "topic_not_found", ["public/default/nope"]),
    # A topic that does not exist is created on first use; a bad name is refused.
    ("produce-bad-name", ["produce", "bad name!", "-m", "x"], "invalid_config", ["'bad name!'"]),
    ("consume-bad-name", ["consume", "bad name!"], "invalid_config", ["'bad name!'"]),
    (
        "non-json-message",
        ["produce", "orders", "-m", "{}", "-m", "not json"],
        "invalid_payload",
        ["--messages value 2", "'not json'", "json"],
    ),
    (
        "non-json-file-line",
        ["produce", "orders", "--file", "{files}/not-json.txt"],
        "invalid_payload",
        ["not-json.txt line 2", "not valid json"],
    ),
    (
        "invalid-utf8-file-line",
        ["produce", "text", "--file", "{files}/not-utf8.txt"],
        "invalid_payload",
        ["not-utf8.txt line 2", "not valid string", "\\xff"],
    ),
    (
        "missing-file",
        ["produce", "text", "--file", "{files}/absent.txt"],
        "usage_error",
        ["--file", "absent.txt"],
    ),
    (
        "property-without-equals",
        ["produce", "orders", "-m", "{}", "--property", "color"],
        "usage_error",
        ["--property", "'color'", "KEY=VALUE"],
    ),
    (
        "property-without-key",
        ["produce", "orders", "-m", "{}", "--property", "=blue"],
        "usage_error",
        ["--property", "'=blue'"],
    ),
    ("no-messages", ["produce", "orders"], "usage_error", ["--message", "--file"]),
    (
        "messages-and-file",
        ["produce", "orders", "-m", "{}", "--file", "-"],
        "usage_error",
        ["--message", "--file"],
    ),
    (
        "partition-out-of-range",
        ["produce", "orders", "-m", "{}", "--partition", "5"],
        "invalid_config",
        ["partition", "got 5"],
    ),
    (
        "sequence-id-without-producer",
        ["produce", "orders", "-m", "{}", "--sequence-id", "1"],
        "usage_error",
        ["--sequence-id", "--producer"],
    ),
    (
        "bad-event-time",
        ["produce", "orders", "-m", "{}", "--event-time", "yesterday"],
        "usage_error",
        ["--event-time", "'yesterday'"],
    ),
    ("negative-num", ["consume", "orders", "-n", "-1"], "usage_error", ["--num"]),
    (
        "bad-position",
        ["consume", "orders", "--position", "middle"],
        "usage_error",
        ["--position", "'middle'"],
    ),
    (
        "unsubscribe-unknown-topic",
        ["unsubscribe", "nope", "-s", "audit"],
        "topic_not_found",
        ["public/default/nope"],
    ),
    (
        "unsubscribe-unknown-subscription",
        ["unsubscribe", "orders", "-s", "audit"],
        "subscription_not_found",
        ["public/default/orders", "'audit'"],
    ),
    (
        "unsubscribe-without-subscription",
        ["unsubscribe", "orders"],
        "usage_error",
        ["--subscription"],
    ),
    ("unknown-command", ["frobnicate"], "usage_error", ["frobnicate"]),
]


@pytest.mark.parametrize(
    ("args", "reason", "expected"),
    [pytest.param(args, reason, expected, id=name) for name, args, reason, expected in ERROR_CASES],
)
def test_bad_input_is_one_error_line(
    error_cli: Cli, bad_files: Path, args: list[str], reason: str, expected: list[str]
) -> None:
    argv = ["topics", *(arg.replace("{files}", str(bad_files)) for arg in args)]
    result = error_cli.fail(*argv)
    assert result.stderr.startswith(f"error [{reason}]: "), result.describe()
    for text in expected:
        assert text in result.stderr, result.describe()
    assert result.code == (2 if reason == "usage_error" else 1), result.describe()


def test_bad_input_changes_nothing(error_cli: Cli) -> None:
    topics = json.loads(error_cli.ok("topics", "list", "--json").stdout)
    assert [t["topic"] for t in topics] == ["public/default/orders", "public/default/text"]
    described = json.loads(error_cli.ok("topics", "describe", "orders", "--json").stdout)
    assert described["messages"] == 0


def test_an_unusable_store_is_one_error_line(cli: Cli) -> None:
    result = cli.fail("--store-url", "mysql://db/sparkfn", "topics", "list")
    assert result.stderr.startswith("error [store_error]: ")
    assert "'mysql'" in result.stderr


# --- PostgreSQL --------------------------------------------------------------------


def test_topics_on_postgresql(pg_cli: Cli) -> None:
    name = f"pg-{uuid.uuid4().hex[:12]}"
    assert pg_cli.env["SPARKFN_STORE_URL"].startswith("postgresql")
    pg_cli.ok("topics", "create", name, "-p", "2", "--schema-type", "json", "--retention", "12h")
    listed = json.loads(pg_cli.ok("topics", "list", "--json").stdout)
    assert f"public/default/{name}" in [t["topic"] for t in listed]
    ids = pg_cli.ok(
        "topics", "produce", name, "-m", '{"n": 1}', "-m", '{"n": 2}', "-m", '{"n": 3}',
        "--key", "k", "--producer", "pg", "--sequence-id", "1",
    ).lines  # fmt: skip
    assert len(ids) == 3
    again = pg_cli.ok(
        "topics", "produce", name, "-m", '{"n": 3}', "--key", "k",
        "--producer", "pg", "--sequence-id", "3", "--json",
    )  # fmt: skip
    assert json.loads(again.stdout) == [None]
    # A new subscription starts at latest, as pulsar-client's does, unless told earliest.
    sub = ["topics", "consume", name, "-s", "pg-sub", "--json"]
    assert _values(pg_cli.ok(*sub, "-p", "Earliest", "-n", "2")) == [{"n": 1}, {"n": 2}]
    assert _values(pg_cli.ok(*sub)) == [{"n": 3}]
    described = json.loads(pg_cli.ok("topics", "describe", name, "--json").stdout)
    assert described["messages"] == 3
    assert described["retention_ms"] == 12 * 3600 * 1000
    bad = pg_cli.fail("topics", "produce", name, "-m", "nope")
    assert "error [invalid_payload]" in bad.stderr
    pg_cli.ok("topics", "delete", name, "--yes")
    pg_cli.fail("topics", "describe", name)


# --- option values, in-process ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("1h30m", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    from sparkfn.cli.params import format_duration_ms, parse_duration

    parsed = parse_duration(text)
    assert parsed.total_seconds() == seconds
    assert parse_duration(format_duration_ms(int(seconds * 1000))) == parsed


@pytest.mark.parametrize(
    ("text", "size"),
    [("512", 512), ("10B", 10), ("64k", 65536), ("100MB", 100 << 20), ("1GiB", 1 << 30)],
)
def test_sizes(text: str, size: int) -> None:
    from sparkfn.cli.params import format_size, parse_size

    assert parse_size(text) == size
    assert parse_size(format_size(size)) == size


@pytest.mark.parametrize("text", ["", "7", "7x", "d", "-1h", "0s", "1.5h"])
def test_bad_durations_name_the_value(text: str) -> None:
    import typer

    from sparkfn.cli.params import parse_duration

    with pytest.raises(typer.BadParameter, match=repr(text)):
        parse_duration(text)


def test_a_pydantic_validation_error_becomes_one_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pydantic

    from sparkfn.cli import main as cli_main

    class Config(pydantic.BaseModel):
        parallelism: int

    def invalid(*_args: object, **_kwargs: object) -> None:
        Config.model_validate({"parallelism": "many"})

    monkeypatch.setattr(cli_main, "app", invalid)
    with pytest.raises(SystemExit) as exited:
        cli_main.main(["topics", "list"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error [invalid_config]: Config: parallelism: ")
    assert err.count("\n") == 1


def test_an_avro_topic_is_created_with_its_schema_from_a_file(cli: Cli, tmp_path: Path) -> None:
    schema = {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
    }
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(schema))
    created = cli.ok("topics", "create", "orders", "--schema-type", "avro", "--schema", f"@{path}")
    assert "schema avro" in created.stdout
    # -m splits on commas, as pulsar-client's does: a JSON value with commas takes -s.
    cli.ok("topics", "produce", "orders", "-s", "|", "-m", '{"id": 1, "item": "tea"}')
    consumed = cli.ok("topics", "consume", "orders", "--json")
    assert json.loads(consumed.stdout)["value"] == {"id": 1, "item": "tea"}
    refused = cli.fail("topics", "produce", "orders", "-m", '{"id": "one"}')
    assert "orders" in refused.stderr

    missing = cli.fail("topics", "create", "nothing", "--schema-type", "avro")
    assert "schema" in missing.stderr
    unreadable = cli.fail("topics", "create", "t2", "--schema-type", "avro", "--schema", "@/nope")
    assert "error [invalid_config]: --schema @/nope: cannot read /nope" in unreadable.stderr


def test_ctrl_c_while_a_command_waits_ends_it_quietly(cli: Cli) -> None:
    # A Ctrl+C that no command handles itself (here: produce waiting on its stdin; the
    # demo met it while a --watch was still starting) ends with 130 and no traceback.
    cli.ok("topics", "create", "waiting")
    proc = cli.popen(
        "topics", "produce", "waiting", "--file", "-",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None
    try:
        proc.stdin.write(b"one\n")
        proc.stdin.flush()
        time.sleep(3)  # let it reach the read of its stdin (it waits there, whatever the delay)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read().decode()
    assert code == 130, err
    assert "Traceback" not in err, err
