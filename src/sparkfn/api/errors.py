"""The sparkfn exception hierarchy: every error sparkfn raises on purpose.

Each class derives from :class:`SparkfnError` and also from the builtin it
resembles (``ValueError``, ``LookupError``, ``RuntimeError``, ...), so callers
may catch either. Each carries its own stable, machine-readable ``reason``
(unique in the tree) that the REST API and the CLI report next to the human
message. docs/errors.md draws the tree, with each class's HTTP status and reason;
``tests/api/test_errors.py`` keeps that page and this module in step. Every class is
defined here and nowhere else; the public ones are exported from :mod:`sparkfn`.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkfn.api.lifecycle import DeathCause


class SparkfnError(Exception):
    """Root of every error sparkfn raises on purpose."""

    reason = "sparkfn_error"


class ConfigError(SparkfnError, ValueError):
    """A configuration value, name or option is invalid."""

    reason = "invalid_config"


class FunctionLoadError(ConfigError):
    """The function's code cannot be loaded: bad file, import error, wrong name or shape."""

    reason = "function_load_error"


class ConnectorLoadError(ConfigError):
    """A connector's code cannot be loaded: unknown built-in, bad file, wrong class."""

    reason = "connector_load_error"


class NoOutputTopicError(ConfigError):
    """A trigger of a function that has no output topic, so no output to return."""

    reason = "no_output_topic"


class ConfigLimitError(ConfigError):
    """A connector's setting (a timeout, size or count) is over its upper bound; the message
    names the connector, the field, the value found and the limit."""

    reason = "config_over_limit"


class BrokerUnreachableError(ConfigError):
    """A broker did not answer a connector's check (connect, declare, a lookup) in its bound;
    the message names the broker, the host and the step."""

    reason = "broker_unreachable"


class SubscriptionInUseError(ConfigError):
    """Another function, sink or query reads the subscription: one owner per subscription
    (two planners would overwrite each other's plans and lose messages); names both."""

    reason = "subscription_in_use"


class PayloadError(SparkfnError, ValueError):
    """A message value does not match its topic's schema type."""

    reason = "invalid_payload"


class NotFoundError(SparkfnError, LookupError):
    """A named object does not exist."""

    reason = "not_found"


class TopicNotFoundError(NotFoundError):
    """The topic does not exist."""

    reason = "topic_not_found"


class FunctionNotFoundError(NotFoundError):
    """No function of that name is registered (or that version does not exist)."""

    reason = "function_not_found"


class SourceNotFoundError(FunctionNotFoundError):
    """No source of that name is registered on the worker (or that version does not exist)."""

    reason = "source_not_found"


class SinkNotFoundError(FunctionNotFoundError):
    """No sink of that name is registered on the worker (or that version does not exist)."""

    reason = "sink_not_found"


class PackageNotFoundError(NotFoundError):
    """No package is stored under that digest or path."""

    reason = "package_not_found"


class SubscriptionNotFoundError(NotFoundError):
    """The topic has no subscription of that name."""

    reason = "subscription_not_found"


class AlreadyExistsError(SparkfnError, ValueError):
    """A named object exists already."""

    reason = "already_exists"


class TenantNotFoundError(NotFoundError):
    """No function, topic or ``tenants create`` made that tenant."""

    reason = "tenant_not_found"


class NamespaceNotFoundError(NotFoundError):
    """No function, topic or ``namespaces create`` made that namespace."""

    reason = "namespace_not_found"


class TenantExistsError(AlreadyExistsError):
    """The tenant exists already."""

    reason = "tenant_already_exists"


class NamespaceExistsError(AlreadyExistsError):
    """The namespace exists already."""

    reason = "namespace_already_exists"


class NotEmptyError(SparkfnError, ValueError):
    """A tenant or namespace to delete still holds functions, connectors or topics."""

    reason = "not_empty"


class TopicExistsError(AlreadyExistsError):
    """A topic with that name exists already."""

    reason = "topic_exists"


class FunctionExistsError(AlreadyExistsError):
    """A function of that name is registered already."""

    reason = "function_already_exists"


class SourceExistsError(FunctionExistsError):
    """A source of that name is registered already."""

    reason = "source_already_exists"


class SinkExistsError(FunctionExistsError):
    """A sink of that name is registered already."""

    reason = "sink_already_exists"


class PackageError(SparkfnError, ValueError):
    """An uploaded function package cannot be used (unknown kind, corrupt archive)."""

    reason = "invalid_package"


class PackageTooLargeError(PackageError):
    """An upload, or what an archive expands to, is over its configured limit."""

    reason = "package_too_large"


class UnsafeArchiveError(PackageError):
    """An archive member would land outside its directory: ``..``, an absolute path, a link."""

    reason = "unsafe_archive"


class AuthError(SparkfnError, PermissionError):
    """The request has no valid credentials: missing, expired or tampered token."""

    reason = "unauthorized"


class ForbiddenError(AuthError):
    """The credentials are valid but their role may not do this."""

    reason = "forbidden"


class StoreError(SparkfnError, RuntimeError):
    """The metadata store cannot be opened or used."""

    reason = "store_error"


class SchemaVersionError(StoreError):
    """The store was written by a newer sparkfn than this one."""

    reason = "store_schema_too_new"


class DataDirError(StoreError):
    """The data directory (segment files, the default SQLite store) cannot be created or written."""

    reason = "data_dir_unusable"


class StorageFullError(StoreError, OSError):
    """A write found no space (a full disk or quota, the database at its limit: SQLite's
    ``SQLITE_FULL``, PostgreSQL's ``disk_full``, ``ENOSPC`` or ``EDQUOT`` on a file; see
    :mod:`sparkfn.store.failures`): rolled back, it succeeds once space is freed. ``errno`` is ``ENOSPC``."""

    reason = "storage_full"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errno = errno.ENOSPC


class StoreUnavailableError(StoreError):
    """The store or the data directory refuses writes for a reason other than space (a lost
    connection, a server shutting down, a failing disk): rolled back, it may succeed when retried."""

    reason = "store_unavailable"


class StaleLeaderError(StoreError):
    """A cluster leader's write in a term that is no longer the current one: another worker
    took the leader lock since; nothing was written, and this worker is not the leader."""

    reason = "stale_leader"


class SecretsKeyError(StoreError):
    """A secret stored encrypted does not open: the worker has no key, or not the one it was
    sealed with (:mod:`sparkfn.store.sealed`). The message names the function or connector and
    the field; the key it was sealed with (``secrets.key``, ``SPARKFN_SECRETS_KEY``) fixes it."""

    reason = "secrets_key_unusable"


class SparkClusterError(SparkfnError, RuntimeError):
    """The local Spark cluster (``sparkfn cluster up``) did not start; the message quotes its logs."""

    reason = "spark_cluster_failed"


class ClusterAlreadyUpError(AlreadyExistsError):
    """A Spark cluster recorded under the same directory still runs (``sparkfn cluster up``)."""

    reason = "cluster_already_up"


class FunctionFailedError(SparkfnError, RuntimeError):
    """A function's query stopped with an error."""

    reason = "function_failed"


class StaleRunError(FunctionFailedError):
    """A run of a function was replaced by a newer one (a higher epoch); its commits are refused."""

    reason = "stale_run"


class FunctionNotRunningError(SparkfnError, RuntimeError):
    """The request needs the function running here (a trigger, say) and it is not."""

    reason = "function_not_running"


class InstanceStoppingError(FunctionNotRunningError):
    """One instance is draining or suspending alone; it can be started once it is ``STOPPED``."""

    reason = "instance_stopping"


class SubscriptionBusyError(SparkfnError, RuntimeError):
    """A running function or sink owns the subscription that a request would delete (as
    Pulsar refuses one with connected consumers), unless forced; names the owner."""

    reason = "subscription_busy"


class WorkerError(SparkfnError, RuntimeError):
    """A worker refused a request of the admin CLI for a reason sparkfn has no class for: its
    ``reason`` is the worker's own (``invalid_request``, ...); one with a class here is raised as it."""

    reason = "worker_error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class NoWorkerCapacityError(SparkfnError, RuntimeError):
    """No live worker of the cluster has room for a run that a create or a start asked for."""

    reason = "no_worker_capacity"


class WorkerUnreachableError(WorkerError, ConnectionError):
    """No worker answers at the URL the admin CLI was given, or none in time."""

    reason = "worker_unreachable"


class TriggerError(SparkfnError, RuntimeError):
    """A value sent to a function by ``trigger`` gave no output."""

    reason = "trigger_error"


class TriggerTimeoutError(TriggerError, TimeoutError):
    """No output of the triggered value arrived within the timeout."""

    reason = "trigger_timeout"


class TriggerFailedError(TriggerError):
    """The function failed on the triggered value in every attempt (it was dead-lettered)."""

    reason = "trigger_failed"


class FunctionFailure(SparkfnError, RuntimeError):
    """The exception a failure handler receives: an instance's death, rebuilt from the store.

    >>> def handle(failure: FunctionFailure, info: FailureInfo) -> Response:
    ...     return Response.SHUTDOWN_FUNCTION if failure.fatal else Response.REPLACE_INSTANCE
    """

    reason = "instance_failed"

    def __init__(self, fqfn: str, instance_id: int | None, cause: DeathCause, fatal: bool) -> None:
        where = f"instance {instance_id}" if instance_id is not None else "all instances"
        super().__init__(f"function {fqfn} ({where}): {cause}")
        self.fqfn = fqfn
        self.instance_id = instance_id
        self.cause = cause
        self.fatal = fatal


class FatalError(SparkfnError, RuntimeError):
    """Raised in a task whose instance was terminated by ``context.fatal``."""

    reason = "fatal_error"


class PythonWorkerCrashed(SparkfnError, RuntimeError):
    """A message killed the Python worker that processed it (``os._exit``, a signal, the OOM
    killer); the message is dead-lettered with this as its cause."""

    reason = "python_worker_crashed"


class MessageTimeoutError(SparkfnError, TimeoutError):
    """An attempt at a message ran longer than the function's ``timeout_ms`` (with
    ``timeout_interrupts``); the message fails as if ``process`` had raised (retried, then dead-lettered)."""

    reason = "message_timeout"


class ConnectorFailedError(SparkfnError, RuntimeError):
    """A source or sink instance died (an exception from the connector, or ``fatal``)."""

    reason = "connector_failed"


class ProducerClosedError(SparkfnError, RuntimeError):
    """A message was sent with a :class:`sparkfn.Producer` after its ``close()``."""

    reason = "producer_closed"


class HarnessClosedError(SparkfnError, RuntimeError):
    """A message was sent to a :class:`sparkfn.testing.FunctionHarness` after ``close()``."""

    reason = "harness_closed"
