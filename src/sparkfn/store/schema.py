"""The store's current tables, as SQLAlchemy Core metadata (more in ``registry_schema``).

A fresh store is created from them directly; an existing store is brought up
to them by the numbered steps in :mod:`sparkfn.store.migrations`.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

schema_version = Table(
    "sparkfn_schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("description", String(200), nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)

topics = Table(
    "topics",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(128), nullable=False),
    Column("namespace", String(128), nullable=False),
    Column("name", String(128), nullable=False),
    Column("partitions", Integer, nullable=False),
    Column("schema_type", String(16), nullable=False),
    # None means keep forever.
    Column("retention_ms", BigInteger, nullable=True),
    Column("retention_bytes", BigInteger, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("tenant", "namespace", "name", name="uq_topics_name"),
)

# One row per topic partition. Appends lock this row, so offsets are handed
# out in the committing transaction and are contiguous across processes.
partitions = Table(
    "topic_partitions",
    metadata,
    Column("topic_id", Integer, ForeignKey("topics.id", ondelete="CASCADE"), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("next_offset", BigInteger, nullable=False),
    # Lowest offset still retained; everything below was deleted by retention.
    Column("start_offset", BigInteger, nullable=False),
    PrimaryKeyConstraint("topic_id", "partition"),
)

segments = Table(
    "segments",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("topic_id", Integer, ForeignKey("topics.id", ondelete="CASCADE"), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("base_offset", BigInteger, nullable=False),
    Column("count", Integer, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    # Exactly one of location (path relative to the data dir) and inline_data is set.
    Column("location", String(512), nullable=True),
    Column("inline_data", LargeBinary, nullable=True),
    Column("max_publish_time", DateTime(timezone=True), nullable=False),
    Column("commit_id", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("topic_id", "partition", "base_offset", name="uq_segments_offset"),
)
Index("ix_segments_lookup", segments.c.topic_id, segments.c.partition, segments.c.base_offset)

# Producer de-duplication: the highest sequence id persisted per producer
# and partition (Pulsar keeps it per partition too).
producer_sequences = Table(
    "producer_sequences",
    metadata,
    Column("topic_id", Integer, ForeignKey("topics.id", ondelete="CASCADE"), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("producer", String(256), nullable=False),
    Column("last_sequence_id", BigInteger, nullable=False),
    PrimaryKeyConstraint("topic_id", "partition", "producer"),
)

# Durable named subscriptions: the next offset to deliver, per partition.
subscriptions = Table(
    "subscriptions",
    metadata,
    Column("topic_id", Integer, ForeignKey("topics.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(256), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("cursor", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("topic_id", "name", "partition"),
)

# Micro-batches committed by a streaming sink; a replayed batch id is skipped.
sink_commits = Table(
    "sink_commits",
    metadata,
    Column("sink_id", String(512), nullable=False),
    Column("batch_id", BigInteger, nullable=False),
    Column("commit_id", String(64), nullable=False),
    Column("committed_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("sink_id", "batch_id"),
)

# Segment files no longer referenced by the index. They are deleted only
# after a grace period, so a reader that looked a segment up just before
# compaction or retention replaced it can still open the file.
garbage_files = Table(
    "garbage_files",
    metadata,
    Column("location", String(512), primary_key=True),
    Column("delete_after", DateTime(timezone=True), nullable=False),
)

# --- functions (schema version 2) -------------------------------------------

# Per-function key space: counters and values (Pulsar's state API).
function_state = Table(
    "function_state",
    metadata,
    Column("fqfn", String(400), nullable=False),
    Column("key", String(1024), nullable=False),
    Column("counter", BigInteger, nullable=True),
    Column("value", LargeBinary, nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("fqfn", "key"),
)

# Lifetime totals per instance, advanced by each committed batch.
function_instance_stats = Table(
    "function_instance_stats",
    metadata,
    Column("fqfn", String(400), nullable=False),
    Column("instance_id", Integer, nullable=False),
    Column("received", BigInteger, nullable=False),
    Column("processed_successfully", BigInteger, nullable=False),
    Column("user_exceptions", BigInteger, nullable=False),
    Column("system_exceptions", BigInteger, nullable=False),
    Column("dead_lettered", BigInteger, nullable=False),
    Column("latency_ms_sum", Float, nullable=False),
    Column("latency_count", BigInteger, nullable=False),
    Column("last_invocation_ms", BigInteger, nullable=True),
    Column("user_metrics", Text, nullable=False),  # JSON {name: {count,sum,min,max}}
    Column("batches", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("fqfn", "instance_id"),
)

# One row per instance per committed batch, kept a few minutes, for the
# 1-minute metric variants.
function_batch_stats = Table(
    "function_batch_stats",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fqfn", String(400), nullable=False),
    Column("instance_id", Integer, nullable=False),
    Column("committed_at", DateTime(timezone=True), nullable=False),
    Column("received", BigInteger, nullable=False),
    Column("processed_successfully", BigInteger, nullable=False),
    Column("user_exceptions", BigInteger, nullable=False),
    Column("system_exceptions", BigInteger, nullable=False),
    Column("latency_ms_sum", Float, nullable=False),
    Column("latency_count", BigInteger, nullable=False),
)
Index("ix_function_batch_stats", function_batch_stats.c.fqfn, function_batch_stats.c.committed_at)

# The latest exceptions per instance and kind (user/system), newest kept.
function_exceptions = Table(
    "function_exceptions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fqfn", String(400), nullable=False),
    Column("instance_id", Integer, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("type", String(256), nullable=False),
    Column("message", Text, nullable=False),
    Column("traceback", Text, nullable=False),
    Column("message_id", String(64), nullable=True),
    Column("timestamp_ms", BigInteger, nullable=False),
)
Index("ix_function_exceptions", function_exceptions.c.fqfn, function_exceptions.c.instance_id)

# at_most_once: the end offsets of the last batch a source planned. A batch
# planned again with the same end is a replay after a failure, and dropped.
source_claims = Table(
    "source_claims",
    metadata,
    Column("sink_id", String(512), primary_key=True),
    Column("end_offsets", Text, nullable=False),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
)

# --- lifecycle (version 3) -------------------------------------------------------
# One row per function, sink or source run by a supervisor: its state, the
# query epoch (bumped at every (re)start of its query) and the stop request
# the source reader acts on (DESIGN.md 2.3).
function_runs = Table(
    "function_runs",
    metadata,
    Column("fqfn", String(400), primary_key=True),
    Column("kind", String(16), nullable=False),  # function, sink, source
    Column("state", String(16), nullable=False),
    Column("cause", Text, nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("parallelism", Integer, nullable=False),
    Column("stop_mode", String(16), nullable=True),  # drain, suspend, cancel
    Column("drain_target", Text, nullable=True),  # JSON {"topic#partition": end}
    Column("final_seq", Integer, nullable=False),  # end-of-stream batches asked for
    Column("final_committed", Integer, nullable=False),  # ... and committed
    Column("restarts", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# Per instance: its state and, once dead, why (the death exception).
function_instance_runs = Table(
    "function_instance_runs",
    metadata,
    Column("fqfn", String(400), nullable=False),
    Column("instance_id", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("cause", Text, nullable=False),
    Column("epoch", Integer, nullable=False),  # the epoch the death belongs to
    Column("restarts", Integer, nullable=False),
    Column("fatal_exceptions", Integer, nullable=False),
    Column("dead", Boolean, nullable=False),
    Column("handled", Boolean, nullable=False),  # the supervisor acted on the death
    Column("fatal", Boolean, nullable=False),
    Column("death_type", String(256), nullable=True),
    Column("death_message", Text, nullable=True),
    Column("death_traceback", Text, nullable=True),
    Column("death_origin", String(64), nullable=True),
    Column("death_thread", String(256), nullable=True),
    Column("died_at", DateTime(timezone=True), nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("fqfn", "instance_id"),
)

# Every state transition, with its cause and time. instance_id -1: the function.
function_transitions = Table(
    "function_transitions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fqfn", String(400), nullable=False),
    Column("instance_id", Integer, nullable=False),
    Column("from_state", String(16), nullable=False),
    Column("to_state", String(16), nullable=False),
    Column("cause", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
)
Index("ix_function_transitions", function_transitions.c.fqfn, function_transitions.c.id)

# Supervisor -> Python worker processes: close (or shut down gracefully) the
# user objects of some instances. The control thread in each worker acts on
# them and marks the objects closed in function_objects.
function_commands = Table(
    "function_commands",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fqfn", String(400), nullable=False),
    Column("instances", Text, nullable=False),  # JSON list of instance ids
    Column("command", String(32), nullable=False),  # close, graceful_close, cancel
    Column("epoch", Integer, nullable=False),  # objects of this epoch or older
    Column("issued_at", DateTime(timezone=True), nullable=False),
    # Ids never reused (version 8): worker processes remember the last one they read.
    sqlite_autoincrement=True,
)

# Every user object created in a Python worker process, and when it closed.
function_objects = Table(
    "function_objects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fqfn", String(400), nullable=False),
    Column("instance_id", Integer, nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("host", String(256), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("closed_at", DateTime(timezone=True), nullable=True),
    Column("closed_by", String(64), nullable=True),  # the command or event that closed it
    Column("close_error", Text, nullable=True),
    sqlite_autoincrement=True,  # ids never reused (version 8): workers hold theirs
)
Index("ix_function_objects", function_objects.c.fqfn, function_objects.c.closed_at)

# --- subscriptions of queries (version 4) ----------------------------------------
# The batch a streaming query planned last for a subscription: what it reads
# of each partition (from the cursor on), so the sink's commit can move the
# cursors in its own transaction (see sparkfn.topics.subscription).
subscription_plans = Table(
    "subscription_plans",
    metadata,
    Column("name", String(256), primary_key=True),
    Column("epoch", Integer, nullable=False),  # the run that planned it
    Column("spark_start", Text, nullable=False),  # Spark's offsets: the batch's identity
    Column("spark_end", Text, nullable=False),
    Column("spans", Text, nullable=False),  # JSON [[topic_id, partition, start, end], ...]
    Column("acked", Boolean, nullable=False),  # at-most-once: cursors moved at planning
    Column("committed", Boolean, nullable=False),
    Column("planned_at", DateTime(timezone=True), nullable=False),
)

SUBSCRIPTION_TABLES = (subscription_plans,)

# --- topic schemas (version 6) ---------------------------------------------------
# The schema definition of an ``avro`` topic (Avro JSON), one row per such topic.
# A table of its own rather than a column of ``topics``: code that reads and
# writes topics needs only the version-1 tables.
topic_schemas = Table(
    "topic_schemas",
    metadata,
    Column("topic_id", Integer, ForeignKey("topics.id", ondelete="CASCADE"), primary_key=True),
    Column("definition", Text, nullable=False),
)

TOPIC_SCHEMA_TABLES = (topic_schemas,)

# --- subscription owners (version 9) ---------------------------------------------
# The one query that reads a subscription: the control id of its run (a
# function's FQFN, a sink's ``sink:<fqfn>``) or, for a plain reader (no
# ``controlId``), ``reader:<subscription>``. The first plan claims it in its
# own transaction; another owner's plan and commit are refused, so two
# queries never overwrite each other's plan (sparkfn.topics.subscription).
# Released with the subscription and when the function is purged.
subscription_owners = Table(
    "subscription_owners",
    metadata,
    Column("name", String(256), primary_key=True),  # a subscriptions / subscription_plans name
    Column("owner", String(512), nullable=False),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
)

SUBSCRIPTION_OWNER_TABLES = (subscription_owners,)

# --- query groups (version 10) ------------------------------------------------------
# The functions a worker runs in one shared streaming query (a group,
# sparkfn.runtime.group): one row per member run, written by its supervisor
# when it launches (with the run's epoch) and removed when it halts. The
# group's reader plans only members listed here in their current epoch, and
# a member's commit checks its row in the same transaction, so a member that
# left (cancelled, dead, stopped) never commits a batch planned before.
group_members = Table(
    "group_members",
    metadata,
    Column("control_id", String(400), primary_key=True),  # a function_runs fqfn
    Column("group_name", String(200), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    Column("spec", Text, nullable=False),  # the FunctionConfig as JSON
    Column("joined_at", DateTime(timezone=True), nullable=False),
    Index("ix_group_members_group", "group_name"),
)

GROUP_TABLES = (group_members,)

LIFECYCLE_TABLES = (
    function_runs,
    function_instance_runs,
    function_transitions,
    function_commands,
    function_objects,
)

FUNCTION_TABLES = (
    function_state,
    function_instance_stats,
    function_batch_stats,
    function_exceptions,
    source_claims,
)

# --- store settings (version 12) ---------------------------------------------------
# Settings every process on the store obeys, one row per key (a value as
# text): whether topics are created on first use, and with how many
# partitions and which schema type (sparkfn.topics.autocreate).
store_settings = Table(
    "store_settings",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

STORE_SETTINGS_TABLES = (store_settings,)
