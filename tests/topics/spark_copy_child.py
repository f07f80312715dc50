"""Child process for crash tests: copy topic ``src`` to ``dst`` with Spark.

Usage: python spark_copy_child.py STORE_URL DATA_DIR CHECKPOINT MAX_PER_BATCH
Prints ``batch N`` after each micro-batch so the parent can time a SIGKILL.
"""

from __future__ import annotations

import sys

from sparkfn.runtime.spark import spark_session


def main() -> None:
    store_url, data_dir, checkpoint, max_per_batch = sys.argv[1:5]
    spark = spark_session(master="local[2]", app_name="crash-child")
    options = {"storeUrl": store_url, "dataDir": data_dir}
    source = (
        spark.readStream.format("sparkfn")
        .options(**options)
        .option("topic", "src")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerBatch", max_per_batch)
        .load()
    )
    query = (
        source.select("key", "value", "properties")
        .writeStream.format("sparkfn")
        .options(**options)
        .option("topic", "dst")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    while query.isActive:
        query.awaitTermination(0.2)
        progress = query.lastProgress
        if progress:
            print(f"batch {progress['batchId']}", flush=True)
    query.awaitTermination()
    print("done", flush=True)


if __name__ == "__main__":
    main()
