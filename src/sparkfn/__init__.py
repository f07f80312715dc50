"""sparkfn: Pulsar-style serverless functions on Apache Spark Structured Streaming.

The public API is what this module exports; everything else is internal.

>>> from sparkfn import Store, TopicAdmin, Producer, Consumer
>>> store = Store.open()                       # ~/.sparkfn, SQLite
>>> TopicAdmin(store).create("orders", partitions=4, schema_type="json")
>>> Producer(store, "orders").send({"id": 1}, key="alice")
"""

from sparkfn.api.errors import (
    AlreadyExistsError,
    ConfigError,
    NotFoundError,
    PayloadError,
    SchemaVersionError,
    SparkfnError,
    StoreError,
    TopicExistsError,
    TopicNotFoundError,
)
from sparkfn.config.names import TopicName
from sparkfn.config.settings import Settings
from sparkfn.runtime.spark import spark_session
from sparkfn.store.store import Store
from sparkfn.topics.admin import PartitionStats, TopicAdmin, TopicInfo
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage, SchemaType
from sparkfn.topics.producer import Producer

__version__ = "0.1.0"

__all__ = [
    "AlreadyExistsError",
    "ConfigError",
    "Consumer",
    "Message",
    "NotFoundError",
    "PartitionStats",
    "PayloadError",
    "Producer",
    "ReceivedMessage",
    "SchemaType",
    "SchemaVersionError",
    "Settings",
    "SparkfnError",
    "Store",
    "StoreError",
    "TopicAdmin",
    "TopicExistsError",
    "TopicInfo",
    "TopicName",
    "TopicNotFoundError",
    "spark_session",
]
