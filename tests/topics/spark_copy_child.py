"""Child process for crash tests: copy topic ``src`` to ``dst`` with Spark.

Usage: python spark_copy_child.py STORE_URL DATA_DIR CHECKPOINT MAX_PER_BATCH
Prints ``batch N`` after each micro-batch so the parent can time a SIGKILL.
The parent imports :func:`start_copy` to run the same query after the kills.
"""

from __future__ import annotations

import sys
from typing import Any

from sparkfn.runtime.spark.session import spark_session


def start_copy(
    spark: Any, store_url: str, data_dir: str, checkpoint: str, max_per_batch: int
) -> Any:
    """Start the copy query (``availableNow``); returns the ``StreamingQuery``."""
    options = {"storeUrl": store_url, "dataDir": data_dir}
    source = (
        spark.readStream.format("sparkfn")
        .options(**options)
        .option("topic", "src")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerBatch", str(max_per_batch))
        .load()
    )
    return (
        source.select("key", "value", "properties")
        .writeStream.format("sparkfn")
        .options(**options)
        .option("topic", "dst")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def main() -> None:
    store_url, data_dir, checkpoint, max_per_batch = sys.argv[1:5]
    spark = spark_session(master="local[2]", app_name="crash-child")
    query = start_copy(spark, store_url, data_dir, checkpoint, int(max_per_batch))
    while query.isActive:
        query.awaitTermination(0.2)
        progress = query.lastProgress
        if progress:
            print(f"batch {progress['batchId']}", flush=True)
    query.awaitTermination()
    print("done", flush=True)


if __name__ == "__main__":
    main()
