"""``format("sparkfn")``: sparkfn topics for Structured Streaming, and its options.

Reading::

    spark.readStream.format("sparkfn")
        .option("topic", "public/default/in")          # or "topics": "a,b"
        .option("startingOffsets", "earliest")         # or "latest" (default)
        .option("maxRecordsPerBatch", 10000)           # admission control
        .load()

Rows have the columns of :data:`~sparkfn.topics.message.READ_SCHEMA`
(``key, value, properties, event_time, publish_time, producer, sequence_id,
topic, partition, offset``). ``Trigger.AvailableNow`` is supported.
``propertiesAs`` ``json`` gives ``properties`` as JSON object text instead of
a map (null when a message has none): Spark converts a string column several
times faster, which the function runtime uses between its Python stages.
The reader's other options (subscriptions, instances) are in
:mod:`.reader`.

Writing::

    df.writeStream.format("sparkfn")
        .option("topic", "public/default/out")
        .option("checkpointLocation", "/path")         # also the sink's identity
        .start()

Every option is read on the driver; executors get resolved values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource

from sparkfn.api.errors import ConfigError
from sparkfn.topics.message import SPARK_READ_TYPES

# The reader, the writer and the store are imported where they are used: Spark
# unpickles this class in a fresh Python planner worker at the start of every
# query (pyspark.sql.worker.create_data_source), which only asks for the
# schema; SQLAlchemy and the rest cost it about 0.15 s more.
if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from sparkfn.store.store import Store
    from sparkfn.topics.spark.reader import SparkfnStreamReader
    from sparkfn.topics.spark.writer import SparkfnStreamWriter


def options_of(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's options with lower-cased names (Spark matches them case-insensitively)."""
    return {k.lower(): v for k, v in options.items()}


def read_columns(opts: Mapping[str, str]) -> list[str]:
    """The message columns to produce: option ``columns`` (comma list) or all."""
    raw = opts.get("columns")
    if not raw:
        return list(SPARK_READ_TYPES)
    names = [c.strip() for c in raw.split(",") if c.strip()]
    unknown = [c for c in names if c not in SPARK_READ_TYPES]
    if unknown:
        msg = f"sparkfn data source option columns: unknown {unknown}; choose from {list(SPARK_READ_TYPES)}"
        raise ConfigError(msg)
    return names


def read_schema(opts: Mapping[str, str]) -> str:
    """The Spark DDL schema of the read rows for these options."""
    # A bad propertiesAs is reported when the query starts, with the other options.
    as_json = opts.get("propertiesas", "").strip().lower() == "json"
    fields = [
        f"{name} {'string' if name == 'properties' and as_json else SPARK_READ_TYPES[name]}"
        for name in read_columns(opts)
    ]
    if "instances" in opts:
        fields.append("instance_id int")
    return ", ".join(fields)


def current_ends(store: Store, topics: list[str]) -> dict[str, int]:
    """The committed end offsets of ``topics`` now, keyed as the reader keys them."""
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.topics.log import end_offsets
    from sparkfn.topics.spark.planning import offset_key

    admin = TopicAdmin(store)
    out = {}
    for name in topics:
        topic = admin.get(name)
        for part, (_, end) in end_offsets(store, topic).items():
            out[offset_key(topic, part)] = end
    return out


class SparkfnDataSource(DataSource):
    """``format("sparkfn")``: sparkfn topics for Structured Streaming."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "sparkfn"

    def schema(self) -> str:
        """Called once on the driver: the message row schema (+ ``instance_id`` with
        ``instances``)."""
        return read_schema(options_of(self.options))

    def streamReader(self, schema: StructType) -> SparkfnStreamReader:  # noqa: N802
        """Called once on the driver per query start."""
        from sparkfn.topics.spark.reader import SparkfnStreamReader

        opts = options_of(self.options)
        return SparkfnStreamReader(opts, read_columns(opts))

    def streamWriter(self, schema: StructType, overwrite: bool) -> SparkfnStreamWriter:  # noqa: N802
        """Called once on the driver per query start."""
        from sparkfn.topics.spark.writer import SparkfnStreamWriter

        return SparkfnStreamWriter(options_of(self.options), schema)


def spark_options(store: Store) -> dict[str, Any]:
    """The options that point the data source at ``store``."""
    return {"storeUrl": store.url, "dataDir": str(store.data_dir)}
