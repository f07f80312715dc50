"""Creating the SparkSession sparkfn runs on.

sparkfn points Spark's Python workers at the interpreter running sparkfn
(``PYSPARK_PYTHON``), so a user never has to, and registers the ``sparkfn``
data source.

>>> spark = spark_session()            # local[*]
>>> spark.readStream.format("sparkfn").option("topic", "orders").load()
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Streaming progress is reported by sparkfn; Spark's own is noise at INFO.
    "spark.sql.streaming.metricsEnabled": "false",
    "spark.python.worker.reuse": "true",
}


def use_project_interpreter() -> None:
    """Make Spark's Python workers (and driver) run this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_session(
    master: str = "local[*]",
    app_name: str = "sparkfn",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession, with the sparkfn data source registered."""
    use_project_interpreter()
    from pyspark.sql import SparkSession

    from sparkfn.topics.spark_source import SparkfnDataSource

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(SparkfnDataSource)
    return spark
