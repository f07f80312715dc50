"""Starting a group's streaming query: ``format("sparkfn-group")`` → ``foreachBatch`` commit.

One start for every group: the worker's shared group (:mod:`.run`) and a
group of one (:mod:`.solo`) differ only in the options given here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sparkfn.runtime.group.commit import GroupCommitter
from sparkfn.runtime.group.reader import GROUP_FORMAT, GroupDataSource
from sparkfn.runtime.query.build import REGISTER_LOCK, activate
from sparkfn.store.store import Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


def start_group_query(
    spark: SparkSession,
    store: Store,
    group: str,
    committer: GroupCommitter,
    *,
    options: dict[str, str],
    checkpoint: Path,
    trigger_ms: int = 0,
    pool: str | None = None,
    query_name: str | None = None,
) -> StreamingQuery:
    """Start group ``group``'s query on ``spark``; returns it.

    ``options`` go to the group's reader (``memberBudget``, ``memberSeconds``,
    ``memberBytes``, ``probes``, ``exitNotes``); ``trigger_ms`` is the least
    time between two batches' starts (0: one right after the other); ``pool``
    the FAIR scheduler pool its jobs run in (None: the starting thread's).
    """
    activate(spark)
    if pool is not None:  # a local property of this thread; the query's thread inherits it
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
    reader = (
        spark.readStream.format(GROUP_FORMAT)
        .option("storeUrl", store.url)
        .option("dataDir", str(store.data_dir))
        .option("group", group)
        .option("taskSlots", str(spark.sparkContext.defaultParallelism))
        .options(**options)
    )
    with REGISTER_LOCK:  # a registration per query: see sparkfn.runtime.query.build
        spark.dataSource.register(GroupDataSource)
        frame = reader.load()
    writer = (
        frame.writeStream.foreachBatch(committer)
        .option("checkpointLocation", str(checkpoint))
        .queryName(query_name or f"group_{group}")
    )
    if trigger_ms > 0:
        writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
    return writer.start()
