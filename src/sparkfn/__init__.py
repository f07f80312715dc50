"""sparkfn: Pulsar-style serverless functions on Apache Spark Structured Streaming.

The public API is what this module exports; everything else is internal.

>>> from sparkfn import Store, TopicAdmin, Producer, Consumer
>>> store = Store.open()                       # ~/.sparkfn, SQLite
>>> TopicAdmin(store).create("orders", partitions=4, schema_type="json")
>>> Producer(store, "orders").send({"id": 1}, key="alice")

Functions subclass :class:`Function`; connectors subclass :class:`Source`,
:class:`PushSource` or :class:`Sink` (records are :class:`Record`), and may
implement :class:`GracefulShutdown`. :class:`LocalRun` (a :class:`FunctionRun` you
start yourself, as Pulsar's LocalRunner) runs a :class:`FunctionConfig` and :class:`SinkRun` a :class:`SinkConfig`; a
:class:`FailurePolicy` or a handler ``(FunctionFailure, FailureInfo) ->
Response`` decides what follows a death. Every error sparkfn raises on
purpose is a :class:`SparkfnError` (the tree is drawn in
:mod:`sparkfn.api.errors`).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Not typing's: Spark's Python launcher (sparkfn.runtime.spark.launch) imports this
# package for every Python process Spark starts, and typing costs it 10-25 ms.
# mypy takes any TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from sparkfn.api.connector import END_OF_STREAM, PushSource, Record, Sink, Source
    from sparkfn.api.context import Context
    from sparkfn.api.errors import (
        AlreadyExistsError,
        AuthError,
        BrokerUnreachableError,
        ConfigError,
        ConfigLimitError,
        ConnectorFailedError,
        ConnectorLoadError,
        DataDirError,
        FatalError,
        ForbiddenError,
        FunctionExistsError,
        FunctionFailedError,
        FunctionFailure,
        FunctionLoadError,
        FunctionNotFoundError,
        FunctionNotRunningError,
        HarnessClosedError,
        InstanceStoppingError,
        MessageTimeoutError,
        NamespaceExistsError,
        NamespaceNotFoundError,
        NoOutputTopicError,
        NotEmptyError,
        NotFoundError,
        NoWorkerCapacityError,
        PackageError,
        PackageNotFoundError,
        PackageTooLargeError,
        PayloadError,
        ProducerClosedError,
        PythonWorkerCrashed,
        SchemaVersionError,
        SecretsKeyError,
        SinkExistsError,
        SinkNotFoundError,
        SourceExistsError,
        SourceNotFoundError,
        SparkfnError,
        StaleLeaderError,
        StaleRunError,
        StorageFullError,
        StoreError,
        StoreUnavailableError,
        SubscriptionBusyError,
        SubscriptionInUseError,
        SubscriptionNotFoundError,
        TenantExistsError,
        TenantNotFoundError,
        TopicExistsError,
        TopicNotFoundError,
        TriggerError,
        TriggerFailedError,
        TriggerTimeoutError,
        UnsafeArchiveError,
        WorkerError,
        WorkerUnreachableError,
    )
    from sparkfn.api.function import Function, VectorizedFunction, vectorized
    from sparkfn.api.lifecycle import DeathCause, FailureInfo, GracefulShutdown, Response
    from sparkfn.api.message_id import MessageId
    from sparkfn.api.serde import IdentitySerDe, PickleSerDe, SerDe
    from sparkfn.api.status import (
        DeathException,
        ExceptionInformation,
        FunctionInstanceStats,
        FunctionInstanceStatsData,
        FunctionInstanceStatsDataBase,
        FunctionInstanceStatus,
        FunctionInstanceStatusData,
        FunctionStats,
        FunctionStatus,
        SourceInstanceStats,
        SourceInstanceStatus,
        SourceStatus,
        UserMetricSummary,
    )
    from sparkfn.api.window import (
        MessageEventTime,
        TimestampExtractor,
        Window,
        WindowFunction,
        WindowRecord,
    )
    from sparkfn.config.connector import SinkConfig, SourceConfig
    from sparkfn.config.function import (
        FunctionConfig,
        ProcessingGuarantee,
        SubscriptionPosition,
        SubscriptionType,
    )
    from sparkfn.config.names import TopicName
    from sparkfn.config.policy import FailurePolicy
    from sparkfn.config.settings import Settings
    from sparkfn.connectors.sink.sink_run import SinkRun
    from sparkfn.runtime.function_run import FunctionRun, LocalRun
    from sparkfn.runtime.spark.session import spark_session
    from sparkfn.store.store import Store
    from sparkfn.topics.admin import PartitionStats, TopicAdmin, TopicInfo
    from sparkfn.topics.consumer import Consumer
    from sparkfn.topics.message import Message, ReceivedMessage, SchemaType
    from sparkfn.topics.producer import Producer

# Every name loads its module on first use: ``import sparkfn`` costs nothing,
# and a command or a Spark worker pays only for the modules it uses (pyspark,
# pyarrow and SQLAlchemy take most of a second to import).
_LAZY = {
    "AlreadyExistsError": "sparkfn.api.errors",
    "BrokerUnreachableError": "sparkfn.api.errors",
    "ConfigError": "sparkfn.api.errors",
    "ConfigLimitError": "sparkfn.api.errors",
    "ConnectorFailedError": "sparkfn.api.errors",
    "ConnectorLoadError": "sparkfn.api.errors",
    "ClusterAlreadyUpError": "sparkfn.api.errors",
    "Consumer": "sparkfn.topics.consumer",
    "Context": "sparkfn.api.context",
    "DataDirError": "sparkfn.api.errors",
    "DeathCause": "sparkfn.api.lifecycle",
    "DeathException": "sparkfn.api.status",
    "END_OF_STREAM": "sparkfn.api.connector",
    "ExceptionInformation": "sparkfn.api.status",
    "FailureInfo": "sparkfn.api.lifecycle",
    "FailurePolicy": "sparkfn.config.policy",
    "FatalError": "sparkfn.api.errors",
    "Function": "sparkfn.api.function",
    "MessageEventTime": "sparkfn.api.window",
    "MessageTimeoutError": "sparkfn.api.errors",
    "TimestampExtractor": "sparkfn.api.window",
    "Window": "sparkfn.api.window",
    "WindowFunction": "sparkfn.api.window",
    "WindowRecord": "sparkfn.api.window",
    "FunctionConfig": "sparkfn.config.function",
    "FunctionFailedError": "sparkfn.api.errors",
    "FunctionFailure": "sparkfn.api.errors",
    "FunctionInstanceStats": "sparkfn.api.status",
    "FunctionInstanceStatsData": "sparkfn.api.status",
    "FunctionInstanceStatsDataBase": "sparkfn.api.status",
    "FunctionInstanceStatus": "sparkfn.api.status",
    "FunctionInstanceStatusData": "sparkfn.api.status",
    "FunctionLoadError": "sparkfn.api.errors",
    "FunctionRun": "sparkfn.runtime.function_run",
    "FunctionStats": "sparkfn.api.status",
    "FunctionStatus": "sparkfn.api.status",
    "GracefulShutdown": "sparkfn.api.lifecycle",
    "HarnessClosedError": "sparkfn.api.errors",
    "IdentitySerDe": "sparkfn.api.serde",
    "LocalRun": "sparkfn.runtime.function_run",
    "Message": "sparkfn.topics.message",
    "MessageId": "sparkfn.api.message_id",
    "NotFoundError": "sparkfn.api.errors",
    "PartitionStats": "sparkfn.topics.admin",
    "PayloadError": "sparkfn.api.errors",
    "ProcessingGuarantee": "sparkfn.config.function",
    "PickleSerDe": "sparkfn.api.serde",
    "Producer": "sparkfn.topics.producer",
    "ProducerClosedError": "sparkfn.api.errors",
    "PythonWorkerCrashed": "sparkfn.api.errors",
    "PushSource": "sparkfn.api.connector",
    "ReceivedMessage": "sparkfn.topics.message",
    "Record": "sparkfn.api.connector",
    "Response": "sparkfn.api.lifecycle",
    "SchemaType": "sparkfn.topics.message",
    "SchemaVersionError": "sparkfn.api.errors",
    "SecretsKeyError": "sparkfn.api.errors",
    "SerDe": "sparkfn.api.serde",
    "Settings": "sparkfn.config.settings",
    "Sink": "sparkfn.api.connector",
    "SinkConfig": "sparkfn.config.connector",
    "SinkRun": "sparkfn.connectors.sink.sink_run",
    "SparkClusterError": "sparkfn.api.errors",
    "Source": "sparkfn.api.connector",
    "SourceConfig": "sparkfn.config.connector",
    "SourceInstanceStats": "sparkfn.api.status",
    "SourceInstanceStatus": "sparkfn.api.status",
    "SourceStatus": "sparkfn.api.status",
    "spark_session": "sparkfn.runtime.spark.session",
    "SparkfnError": "sparkfn.api.errors",
    "StaleLeaderError": "sparkfn.api.errors",
    "StaleRunError": "sparkfn.api.errors",
    "Store": "sparkfn.store.store",
    "StorageFullError": "sparkfn.api.errors",
    "StoreError": "sparkfn.api.errors",
    "StoreUnavailableError": "sparkfn.api.errors",
    "SubscriptionPosition": "sparkfn.config.function",
    "SubscriptionType": "sparkfn.config.function",
    "TopicAdmin": "sparkfn.topics.admin",
    "TopicExistsError": "sparkfn.api.errors",
    "NotEmptyError": "sparkfn.api.errors",
    "NamespaceExistsError": "sparkfn.api.errors",
    "TenantExistsError": "sparkfn.api.errors",
    "NamespaceNotFoundError": "sparkfn.api.errors",
    "TenantNotFoundError": "sparkfn.api.errors",
    "TopicInfo": "sparkfn.topics.admin",
    "TopicName": "sparkfn.config.names",
    "TopicNotFoundError": "sparkfn.api.errors",
    "FunctionNotFoundError": "sparkfn.api.errors",
    "PackageNotFoundError": "sparkfn.api.errors",
    "FunctionExistsError": "sparkfn.api.errors",
    "SinkExistsError": "sparkfn.api.errors",
    "SinkNotFoundError": "sparkfn.api.errors",
    "SourceExistsError": "sparkfn.api.errors",
    "SourceNotFoundError": "sparkfn.api.errors",
    "PackageError": "sparkfn.api.errors",
    "PackageTooLargeError": "sparkfn.api.errors",
    "UnsafeArchiveError": "sparkfn.api.errors",
    "AuthError": "sparkfn.api.errors",
    "ForbiddenError": "sparkfn.api.errors",
    "WorkerError": "sparkfn.api.errors",
    "WorkerUnreachableError": "sparkfn.api.errors",
    "FunctionNotRunningError": "sparkfn.api.errors",
    "InstanceStoppingError": "sparkfn.api.errors",
    "NoOutputTopicError": "sparkfn.api.errors",
    "NoWorkerCapacityError": "sparkfn.api.errors",
    "SubscriptionNotFoundError": "sparkfn.api.errors",
    "SubscriptionInUseError": "sparkfn.api.errors",
    "SubscriptionBusyError": "sparkfn.api.errors",
    "TriggerError": "sparkfn.api.errors",
    "TriggerFailedError": "sparkfn.api.errors",
    "TriggerTimeoutError": "sparkfn.api.errors",
    "UserMetricSummary": "sparkfn.api.status",
    "vectorized": "sparkfn.api.function",
    "VectorizedFunction": "sparkfn.api.function",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    msg = f"module 'sparkfn' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AlreadyExistsError",
    "AuthError",
    "BrokerUnreachableError",
    "ClusterAlreadyUpError",
    "ConfigError",
    "ConfigLimitError",
    "ConnectorFailedError",
    "ConnectorLoadError",
    "Consumer",
    "Context",
    "DataDirError",
    "DeathCause",
    "DeathException",
    "END_OF_STREAM",
    "ExceptionInformation",
    "FailureInfo",
    "FailurePolicy",
    "FatalError",
    "ForbiddenError",
    "Function",
    "FunctionConfig",
    "FunctionExistsError",
    "FunctionFailedError",
    "FunctionFailure",
    "FunctionInstanceStats",
    "FunctionInstanceStatsData",
    "FunctionInstanceStatsDataBase",
    "FunctionInstanceStatus",
    "FunctionInstanceStatusData",
    "FunctionLoadError",
    "FunctionNotFoundError",
    "FunctionNotRunningError",
    "FunctionRun",
    "FunctionStats",
    "FunctionStatus",
    "GracefulShutdown",
    "HarnessClosedError",
    "IdentitySerDe",
    "InstanceStoppingError",
    "LocalRun",
    "Message",
    "MessageEventTime",
    "MessageId",
    "MessageTimeoutError",
    "NamespaceExistsError",
    "NamespaceNotFoundError",
    "NoOutputTopicError",
    "NoWorkerCapacityError",
    "NotEmptyError",
    "NotFoundError",
    "PackageError",
    "PackageNotFoundError",
    "PackageTooLargeError",
    "PartitionStats",
    "PayloadError",
    "PickleSerDe",
    "ProcessingGuarantee",
    "Producer",
    "ProducerClosedError",
    "PushSource",
    "PythonWorkerCrashed",
    "ReceivedMessage",
    "Record",
    "Response",
    "SchemaType",
    "SchemaVersionError",
    "SecretsKeyError",
    "SerDe",
    "Settings",
    "Sink",
    "SinkConfig",
    "SinkExistsError",
    "SinkNotFoundError",
    "SinkRun",
    "Source",
    "SourceConfig",
    "SourceExistsError",
    "SourceInstanceStats",
    "SourceInstanceStatus",
    "SourceNotFoundError",
    "SourceStatus",
    "SparkClusterError",
    "SparkfnError",
    "StaleLeaderError",
    "StaleRunError",
    "StorageFullError",
    "Store",
    "StoreError",
    "StoreUnavailableError",
    "SubscriptionBusyError",
    "SubscriptionInUseError",
    "SubscriptionNotFoundError",
    "SubscriptionPosition",
    "SubscriptionType",
    "TenantExistsError",
    "TenantNotFoundError",
    "TimestampExtractor",
    "TopicAdmin",
    "TopicExistsError",
    "TopicInfo",
    "TopicName",
    "TopicNotFoundError",
    "TriggerError",
    "TriggerFailedError",
    "TriggerTimeoutError",
    "UnsafeArchiveError",
    "UserMetricSummary",
    "VectorizedFunction",
    "Window",
    "WindowFunction",
    "WindowRecord",
    "WorkerError",
    "WorkerUnreachableError",
    "spark_session",
    "vectorized",
]
