"""A group of one: a function's or a sink's query of its own, on the group's data path.

``localrun``, a sink, a worker's ``dedicated`` function (or one with Spark
settings, a trigger interval, a topics pattern or a window of its own) and
a member moved out of the worker's group for its budgets each run as the
one member of a group named after the run (:func:`solo_group`). Its reader,
tasks and commit are the shared group's (:mod:`.reader`, :mod:`.task`,
:mod:`.commit`): the admission rules, the staging in the task and the
commit exist once. What a group of one has that the shared group does not
is only what its options say: the function's own trigger interval (at least
an event-time window's watermark interval), Spark settings and scheduler
pool, its batch caps (``max_records_per_batch``, ``max_bytes_per_batch``,
by default those of :mod:`sparkfn.topics.spark.reader`), and the probe of a
poison hunt (:mod:`sparkfn.runtime.lifecycle.poison`).

Its supervisor drives it as it drives any query of a run's own
(:class:`~sparkfn.runtime.lifecycle.query_target.QueryTarget`): each start
joins the group in the run's epoch, then starts the query; a failure ends
the query and the supervisor decides (a poison hunt, the failure policy),
where the shared group starts its query again by itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from sparkfn.runtime.group import members
from sparkfn.runtime.group.commit import GroupCommitter
from sparkfn.runtime.group.start import start_group_query
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.build import (
    PreparedRun,
    adopt_pattern_topics,
    apply_spark_conf,
    checkpoint_dir,
    trigger_ms,
)
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.spark.reader import DEFAULT_MAX_BYTES_PER_BATCH, DEFAULT_MAX_RECORDS_PER_BATCH

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from sparkfn.runtime.lifecycle.poison import Probe

SOLO_PREFIX = "solo:"


def solo_group(control_id: str) -> str:
    """The name of run ``control_id``'s group of one."""
    return SOLO_PREFIX + control_id


def start_solo_query(
    spark: SparkSession,
    store: Store,
    prepared: PreparedRun,
    *,
    epoch: int,
    kind: str = "function",
    version: str | None = None,
    checkpoint: Path | None = None,
    probe: Probe | None = None,
) -> StreamingQuery:
    """Join the run's group of one in ``epoch`` and start its query; returns the query.

    It checks nothing of the function: :func:`~sparkfn.runtime.query.build.prepare`
    did, once. A pattern function's subscription first adopts the topics
    its pattern gained while nothing ran. ``probe``: the reader reads only
    its ends of the member's input until the cursors reach them, and a
    Python worker that dies under the member writes its exit status to the
    probe's file.
    """
    config = prepared.config
    control_id = control.control_id(kind, config.fqfn)
    inputs = prepared.current_inputs(store)
    adopt_pattern_topics(store, config, inputs)
    # Subscribed as it starts, as a consumer subscribes: at "latest", a message produced
    # once the start has returned is read even if the first batch comes seconds later.
    topics = [TopicAdmin(store).get(name) for name in inputs]
    with store.write() as conn:
        subscription.ensure(conn, config.subscription, topics, config.subscription_position.value)
    apply_spark_conf(spark, config)
    group = solo_group(control_id)
    members.join(store, group, control_id, config, epoch=epoch, version=version or prepared.version)
    options = {
        "memberBudget": str(config.max_records_per_batch or DEFAULT_MAX_RECORDS_PER_BATCH),
        "memberBytes": str(config.max_bytes_per_batch or DEFAULT_MAX_BYTES_PER_BATCH),
        "parking": "true",  # its supervisor may park it (sparkfn.runtime.lifecycle.parking)
    }
    if probe is not None:
        options["exitNotes"] = json.dumps({control_id: str(probe.exit_file)})
        if probe.ends:
            options["probes"] = json.dumps({control_id: [list(e) for e in probe.ends]})
    return start_group_query(
        spark,
        store,
        group,
        GroupCommitter(store.url, str(store.data_dir), group),
        options=options,
        checkpoint=checkpoint or checkpoint_dir(store, config, kind),
        trigger_ms=trigger_ms(config),
        query_name=control_id.replace("/", "_"),
    )
