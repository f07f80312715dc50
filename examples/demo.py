"""The main job on the embedded default: topic in, Spark streaming query, topic out.

Run it with ``make demo``. It creates a topic, produces sample sentences,
runs a Spark Structured Streaming query that reads the topic through the
sparkfn data source, upper-cases each message and appends "!", writes the
result to a second topic through the sparkfn sink (exactly once), and
prints what arrived.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from sparkfn.runtime.spark import spark_session
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark_source import spark_options

SENTENCES = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "pulsar functions on spark",
    "hello sparkfn",
    "exactly once please",
]


def main() -> int:
    """Run the demo in a scratch data directory and print the output topic."""
    data_dir = Path(tempfile.mkdtemp(prefix="sparkfn-demo-"))
    try:
        store = Store.open(None, data_dir)
        admin = TopicAdmin(store)
        admin.create("sentences", partitions=2, schema_type="string")
        admin.create("shouted", partitions=2, schema_type="string")
        producer = Producer(store, "sentences")
        for index, sentence in enumerate(SENTENCES):
            producer.send(sentence, key=f"k{index}")
        print(f"produced {len(SENTENCES)} messages to public/default/sentences")

        from pyspark.sql import functions as F

        spark = spark_session(master="local[2]", app_name="sparkfn-demo")
        source = (
            spark.readStream.format("sparkfn")
            .options(**spark_options(store))
            .option("topic", "sentences")
            .option("startingOffsets", "earliest")
            .load()
        )
        shouted = source.select(
            "key",
            F.concat(F.upper(F.col("value").cast("string")), F.lit("!")).alias("value"),
        )
        query = (
            shouted.writeStream.format("sparkfn")
            .options(**spark_options(store))
            .option("topic", "shouted")
            .option("checkpointLocation", str(data_dir / "checkpoints" / "demo"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

        print("public/default/shouted now holds:")
        consumer = Consumer(store, "shouted", initial_position="earliest")
        received = consumer.receive(max_messages=100)
        for message in sorted(received, key=lambda m: m.key or ""):
            print(f"  {message.message_id:>5}  key={message.key}  {message.value.decode()}")
        spark.stop()
        store.close()
        return 0 if len(received) == len(SENTENCES) else 1
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
