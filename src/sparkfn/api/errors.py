"""The sparkfn exception hierarchy.

Every error sparkfn raises on purpose derives from :class:`SparkfnError`, and
also from the builtin it resembles, so callers may catch either::

    SparkfnError
    ├── ConfigError            (ValueError)   invalid configuration or name
    │   └── ConnectorLoadError                 a connector's code cannot be loaded
    ├── PayloadError           (ValueError)   a message value does not fit the topic schema
    ├── NotFoundError          (LookupError)
    │   └── TopicNotFoundError
    ├── AlreadyExistsError     (ValueError)
    │   └── TopicExistsError
    ├── StoreError             (RuntimeError) the metadata store cannot be used
    │   └── SchemaVersionError                 the store is newer than this sparkfn
    ├── FunctionFailedError    (RuntimeError) a function's query stopped with an error
    │   └── StaleRunError                      a newer run replaced this one (fenced)
    └── ConnectorFailedError   (RuntimeError) a connector instance died

``FunctionLoadError`` (a ``ConfigError``: the function's code cannot be
loaded) lives with the loader in :mod:`sparkfn.runtime.loader`.

Each class carries a stable machine-readable ``reason`` that the REST API and
the CLI report next to the human message.
"""

from __future__ import annotations


class SparkfnError(Exception):
    """Root of every error sparkfn raises on purpose."""

    reason = "sparkfn_error"


class ConfigError(SparkfnError, ValueError):
    """A configuration value, name or option is invalid."""

    reason = "invalid_config"


class PayloadError(SparkfnError, ValueError):
    """A message value does not match its topic's schema type."""

    reason = "invalid_payload"


class NotFoundError(SparkfnError, LookupError):
    """A named object does not exist."""

    reason = "not_found"


class TopicNotFoundError(NotFoundError):
    """The topic does not exist."""

    reason = "topic_not_found"


class AlreadyExistsError(SparkfnError, ValueError):
    """A named object exists already."""

    reason = "already_exists"


class TopicExistsError(AlreadyExistsError):
    """A topic with that name exists already."""

    reason = "topic_exists"


class StoreError(SparkfnError, RuntimeError):
    """The metadata store cannot be opened or used."""

    reason = "store_error"


class SchemaVersionError(StoreError):
    """The store was written by a newer sparkfn than this one."""

    reason = "store_schema_too_new"


class FunctionFailedError(SparkfnError, RuntimeError):
    """A function's query stopped with an error."""

    reason = "function_failed"


class ConnectorLoadError(ConfigError):
    """A connector's code cannot be loaded: unknown built-in, bad file, wrong class."""

    reason = "connector_load_error"


class ConnectorFailedError(SparkfnError, RuntimeError):
    """A source or sink instance died (an exception from the connector, or ``fatal``)."""

    reason = "connector_failed"


class StaleRunError(FunctionFailedError):
    """A run of a function was replaced by a newer one (a higher epoch); its commits are refused."""

    reason = "stale_run"
