"""Versioned migrations: stamping, idempotent re-open, too-new stores, upgrades."""

from __future__ import annotations

import multiprocessing
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, create_engine, inspect, select, text
from sqlalchemy.engine import make_url

from sparkfn.api.errors import SchemaVersionError, StoreError
from sparkfn.store import migrations, schema
from sparkfn.store.clock import utc_now as _now
from sparkfn.store.migrations import MIGRATIONS, Migration
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

LATEST = MIGRATIONS[-1].number


def _add_description(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE topics ADD COLUMN description VARCHAR(200)"))


def _add_owner(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE topics ADD COLUMN owner VARCHAR(64)"))


ALL = [m.number for m in MIGRATIONS]
# Synthetic future versions: the code of a newer sparkfn.
NEXT = (*MIGRATIONS, Migration(LATEST + 1, "topics.description", _add_description))
AFTER_NEXT = (*NEXT, Migration(LATEST + 2, "topics.owner", _add_owner))


def _versions(store: Store) -> list[int]:
    with store.read() as conn:
        query = select(schema.schema_version.c.version).order_by(schema.schema_version.c.version)
        return list(conn.execute(query).scalars())


def _topic_columns(store: Store) -> set[str]:
    with store.read() as conn:
        return {c["name"] for c in inspect(conn).get_columns("topics")}


@pytest.fixture
def reopen(store_url: str, data_dir: Path) -> Iterator[Callable[..., Store]]:
    opened: list[Store] = []

    def _open(**kwargs: object) -> Store:
        store = Store.open(store_url, data_dir, **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


def test_fresh_store_is_stamped_with_the_latest_version(store: Store) -> None:
    assert _versions(store) == [m.number for m in MIGRATIONS]
    with store.read() as conn:
        assert migrations.current_version(conn) == LATEST
        assert set(schema.metadata.tables) <= set(inspect(conn).get_table_names())
        descriptions = conn.execute(select(schema.schema_version.c.description)).scalars().all()
    assert descriptions == [m.description for m in MIGRATIONS]


def test_fresh_store_with_more_steps_is_stamped_with_all_of_them(
    reopen: Callable[..., Store],
) -> None:
    store = reopen(steps=NEXT)
    # A fresh store is the current schema; the steps are only recorded.
    assert _versions(store) == [*ALL, LATEST + 1]


def test_reopen_is_idempotent_and_keeps_data(store: Store, reopen: Callable[..., Store]) -> None:
    TopicAdmin(store).create("kept", partitions=2)
    Producer(store, "kept").send(b"v", partition=1)
    for _ in range(3):
        again = reopen()
        assert _versions(again) == ALL
        assert [str(t.name) for t in TopicAdmin(again).list()] == ["public/default/kept"]
        got = Consumer(again, "kept", initial_position="earliest").receive()
        assert [(m.message_id, m.value) for m in got] == [("1:0", b"v")]


def test_store_newer_than_the_code_is_refused(store: Store, reopen: Callable[..., Store]) -> None:
    with store.write() as conn:
        conn.execute(
            schema.schema_version.insert().values(
                version=99, description="from the future", applied_at=_now()
            )
        )
    with pytest.raises(
        SchemaVersionError, match=f"schema version 99 .* up to {LATEST}; upgrade sparkfn"
    ):
        reopen()
    with pytest.raises(StoreError):  # SchemaVersionError is a StoreError
        reopen(steps=AFTER_NEXT)


def test_store_upgraded_by_a_newer_sparkfn_is_refused_by_the_older(
    reopen: Callable[..., Store],
) -> None:
    reopen(steps=NEXT).close()
    with pytest.raises(SchemaVersionError) as caught:
        reopen()
    assert caught.value.reason == "store_schema_too_new"


def test_upgrade_keeps_topics_and_messages_readable(
    store: Store, reopen: Callable[..., Store]
) -> None:
    admin = TopicAdmin(store)
    admin.create("acme/sales/orders", partitions=2, schema_type="json")
    producer = Producer(store, "acme/sales/orders", name="p")
    sent = [producer.send({"n": i}, key=f"k{i}", sequence_id=i) for i in range(20)]
    consumer = Consumer(
        store, "acme/sales/orders", subscription="audit", initial_position="earliest"
    )
    first_half = consumer.receive(max_messages=10)
    consumer.acknowledge()
    store.close()

    upgraded = reopen(steps=NEXT)
    assert _versions(upgraded) == [*ALL, LATEST + 1]
    assert "description" in _topic_columns(upgraded)

    info = TopicAdmin(upgraded).get("persistent://acme/sales/orders")
    assert (info.partitions, info.schema_type.value) == (2, "json")
    everything = Consumer(upgraded, "acme/sales/orders", initial_position="earliest").receive()
    assert sorted(m.message_id for m in everything) == sorted(sent)  # type: ignore[type-var]
    # The subscription cursor and the producer's de-duplication state survived.
    rest = Consumer(upgraded, "acme/sales/orders", subscription="audit").receive()
    assert {m.message_id for m in rest} == set(sent) - {m.message_id for m in first_half}
    assert Producer(upgraded, "acme/sales/orders", name="p").send({"n": 0}, sequence_id=5) is None
    # The new code path still writes and creates topics with the extra column present.
    assert Producer(upgraded, "acme/sales/orders").send({"n": 99}) is not None
    TopicAdmin(upgraded).create("after-upgrade")

    # Opening again at the same version does nothing; a newer step applies on top.
    assert _versions(reopen(steps=NEXT)) == [*ALL, LATEST + 1]
    later = reopen(steps=AFTER_NEXT)
    assert _versions(later) == [*ALL, LATEST + 1, LATEST + 2]
    assert {"description", "owner"} <= _topic_columns(later)


def _engine_without_migrations(store_url: str) -> Engine:
    if store_url.startswith("sqlite"):
        return Store._sqlite_engine(make_url(store_url).database)
    return create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))


@pytest.mark.parametrize("old", range(1, LATEST), ids=lambda v: f"from-v{v}")
def test_a_store_of_every_older_version_upgrades_to_the_current_schema(
    store_url: str, data_dir: Path, old: int
) -> None:
    """A store as release ``old`` left it (its steps only) opens with today's code.

    The old store is built by applying steps 1..old by hand; its topics are
    written with today's topic code, which only needs the version-1 tables.
    """
    engine = _engine_without_migrations(store_url)
    with engine.begin() as conn:
        for step in MIGRATIONS[:old]:
            step.apply(conn)
            conn.execute(
                schema.schema_version.insert().values(
                    version=step.number, description=step.description, applied_at=_now()
                )
            )
    old_store = Store(store_url, data_dir.resolve(), engine)
    try:
        TopicAdmin(old_store).create("kept", partitions=2, schema_type="string")
        sent = Producer(old_store, "kept", name="p").send_batch(
            [Message(f"m{i}".encode(), sequence_id=i) for i in range(6)]
        )
        reader = Consumer(old_store, "kept", subscription="s", initial_position="earliest")
        reader.receive(max_messages=2)
        reader.acknowledge()
    finally:
        old_store.close()

    store = Store.open(store_url, data_dir)
    try:
        assert _versions(store) == ALL
        with store.read() as conn:
            found = inspect(conn)
            for table in schema.metadata.sorted_tables:
                columns = {c["name"] for c in found.get_columns(table.name)}
                assert columns == {c.name for c in table.columns}, table.name
        got = Consumer(store, "kept", initial_position="earliest").receive()
        assert sorted(m.message_id for m in got) == sorted(sent)  # type: ignore[type-var]
        assert len(Consumer(store, "kept", subscription="s").receive()) == 4
        # Sequence 5 went to partition 1 (round robin); de-duplication is per partition.
        assert Producer(store, "kept", name="p").send("dup", sequence_id=5, partition=1) is None
    finally:
        store.close()


def test_pending_steps_apply_in_order(store: Store, reopen: Callable[..., Store]) -> None:
    store.close()
    applied: list[int] = []
    steps = (
        *MIGRATIONS,
        Migration(LATEST + 1, "one more", lambda conn: applied.append(LATEST + 1)),
        Migration(LATEST + 2, "two more", lambda conn: applied.append(LATEST + 2)),
    )
    assert _versions(reopen(steps=steps)) == [*ALL, LATEST + 1, LATEST + 2]
    assert applied == [LATEST + 1, LATEST + 2]
    reopen(steps=steps)
    assert applied == [LATEST + 1, LATEST + 2]


def test_a_failing_step_is_rolled_back_and_retried_on_next_open(
    store: Store, reopen: Callable[..., Store]
) -> None:
    TopicAdmin(store).create("kept")
    store.close()

    def half_done(conn: Connection) -> None:
        _add_description(conn)
        raise RuntimeError("the step failed half way")

    with pytest.raises(RuntimeError, match="half way"):
        reopen(steps=(*MIGRATIONS, Migration(LATEST + 1, "broken", half_done)))
    after = reopen()
    assert _versions(after) == ALL
    assert "description" not in _topic_columns(after)  # the DDL was rolled back too

    fixed = reopen(steps=NEXT)
    assert _versions(fixed) == [*ALL, LATEST + 1]
    assert TopicAdmin(fixed).exists("kept")


def test_upgrade_skips_a_step_another_process_applied_meanwhile(
    store: Store, reopen: Callable[..., Store]
) -> None:
    """Two processes upgrade at once: both see the old version, only one may apply the step."""
    store.close()
    upgrading = reopen()
    factories = 0

    def factory() -> AbstractContextManager[Connection]:
        nonlocal factories
        factories += 1
        if factories == 2:
            # Between our version check and our first step, another process upgrades.
            reopen(steps=NEXT).close()
        return upgrading._migration_connection()

    assert migrations.upgrade(factory, NEXT) == LATEST + 1
    assert _versions(upgrading) == [*ALL, LATEST + 1]


# --- several processes opening one store at once -------------------------------------


def _open_and_create(url: str, data_dir: str, steps_name: str, topic: str, go, out) -> None:  # type: ignore[no-untyped-def]
    try:
        go.wait(30)
        store = Store.open(url, data_dir, steps=globals()[steps_name])
        try:
            TopicAdmin(store).create(topic)
        finally:
            store.close()
        out.put((topic, None))
    except BaseException:
        out.put((topic, traceback.format_exc()))


def _open_concurrently(store_url: str, data_dir: Path, steps_name: str, n: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=_open_and_create,
            args=(store_url, str(data_dir), steps_name, f"t{i}", go, out),
        )
        for i in range(n)
    ]
    for proc in procs:
        proc.start()
    go.set()
    results = dict(out.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0, f"child {proc.pid} exited with {proc.exitcode}"
    failures = {topic: tb for topic, tb in results.items() if tb}
    assert not failures, "\n".join(f"{t}:\n{tb}" for t, tb in failures.items())


def test_concurrent_first_opens_create_the_store_once(store_url: str, data_dir: Path) -> None:
    _open_concurrently(store_url, data_dir, "MIGRATIONS", 3)
    store = Store.open(store_url, data_dir)
    try:
        assert _versions(store) == ALL
        assert [t.name.name for t in TopicAdmin(store).list()] == ["t0", "t1", "t2"]
    finally:
        store.close()


def test_concurrent_upgrades_apply_each_step_once(store: Store, data_dir: Path) -> None:
    TopicAdmin(store).create("before")
    store.close()
    _open_concurrently(store.url, data_dir, "AFTER_NEXT", 3)
    store = Store.open(store.url, data_dir, steps=AFTER_NEXT)
    try:
        assert _versions(store) == [*ALL, LATEST + 1, LATEST + 2]
        assert [t.name.name for t in TopicAdmin(store).list()] == ["before", "t0", "t1", "t2"]
    finally:
        store.close()


def test_opening_a_current_store_waits_for_no_transaction_in_progress(
    store: Store, reopen: Callable[..., Store]
) -> None:
    """Every source runner and Spark worker opens the store: none may queue behind a writer.

    The migration lock is SQLite's write lock or PostgreSQL's advisory lock;
    held here while another open runs.
    """
    opened: list[Store | BaseException] = []

    def open_store() -> None:
        try:
            opened.append(reopen())
        except BaseException as exc:
            opened.append(exc)

    with store._migration_connection():
        opening = threading.Thread(target=open_store, daemon=True)
        opening.start()
        opening.join(timeout=30)
        done_while_held = not opening.is_alive()
    opening.join(timeout=120)
    assert done_while_held, "the open waited for the migration lock"
    assert isinstance(opened[0], Store), opened
    assert TopicAdmin(opened[0]).list() == []
