"""Version 9 on a store that version 8 left: subscriptions in use get their owner at the next plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, inspect, select
from sqlalchemy.engine import make_url

from sparkfn.api.errors import SubscriptionInUseError
from sparkfn.store import schema
from sparkfn.store.clock import utc_now as _now
from sparkfn.store.migrations import MIGRATIONS
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

NAME = "public/default/f"


def _engine_without_migrations(store_url: str) -> Engine:
    if store_url.startswith("sqlite"):
        return Store._sqlite_engine(make_url(store_url).database)
    return create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))


def _version_8_store(store_url: str, data_dir: Path) -> int:
    """A store as version 8 left it, whose function committed [0, 40) at epoch 3."""
    engine = _engine_without_migrations(store_url)
    with engine.begin() as conn:
        for step in MIGRATIONS[:8]:
            step.apply(conn)
            conn.execute(
                schema.schema_version.insert().values(
                    version=step.number, description=step.description, applied_at=_now()
                )
            )
        assert not inspect(conn).has_table("subscription_owners")
    old = Store(store_url, data_dir.resolve(), engine)
    try:
        topic = TopicAdmin(old).create("in", partitions=1)
        Producer(old, "in").send_batch([Message(b"x")] * 60, partition=0)
        with old.write() as conn:
            subscription.ensure(conn, NAME, [topic], "earliest")
            conn.execute(schema.subscriptions.update().values(cursor=40))
            # The plan row as version 8 wrote it: the last batch, committed.
            conn.execute(
                schema.subscription_plans.insert().values(
                    name=NAME,
                    epoch=3,
                    spark_start="{}",
                    spark_end="{}",
                    spans=json.dumps([[topic.id, 0, 0, 40]]),
                    acked=False,
                    committed=True,
                    planned_at=_now(),
                )
            )
        return topic.id
    finally:
        old.close()


def test_a_version_8_store_upgrades_and_its_subscription_is_claimed_by_the_next_plan(
    store_url: str, data_dir: Path
) -> None:
    tid = _version_8_store(store_url, data_dir)
    store = Store.open(store_url, data_dir)
    try:
        with store.read() as conn:
            versions = conn.execute(select(schema.schema_version.c.version)).scalars().all()
            assert sorted(versions) == [m.number for m in MIGRATIONS]
            columns = {c["name"] for c in inspect(conn).get_columns("subscription_owners")}
            assert columns == {"name", "owner", "claimed_at"}
            assert subscription.owner_of(conn, NAME) is None  # nobody until the next plan

        topic = TopicAdmin(store).get("in")

        def plan(owner: str, epoch: int) -> subscription.Plan:
            with store.write() as conn:
                return subscription.plan_batch(
                    conn,
                    NAME,
                    [topic],
                    "earliest",
                    epoch=epoch,
                    spark_start="s",
                    spark_end="e",
                    ends={(tid, 0): 60},
                    owner=owner,
                )

        resumed = plan("public/default/f", 4)  # the function, restarted after the upgrade
        assert [(s.start, s.end) for s in resumed.spans] == [(40, 60)]
        with pytest.raises(SubscriptionInUseError, match="read by function public/default/f"):
            plan("public/default/g", 4)
        with store.write() as conn:
            assert subscription.commit_plan(conn, NAME, 4, owner="public/default/f") is not None
            assert subscription.cursors(conn, NAME) == {(tid, 0): 60}
    finally:
        store.close()
