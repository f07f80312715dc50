"""Preparing a hosted run: what a start refuses first, the subscription it claims, the undo.

A create or an update is checked before anything is kept (:func:`check`):
topics that do not exist, code that does not load, Spark settings the running
session refuses. The checks are the start's own: the
:class:`~sparkfn.runtime.query.build.PreparedRun` they return is what the
start runs, so it does not make them again. A start claims its function's
subscription first (:func:`subscribe`); a create refused after that, or a
delete, removes what the run left (:func:`purge`), the subscription too
unless it existed before (:func:`subscribed`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.connectors.catalog import check_configs
from sparkfn.connectors.sink.sink_config import sink_function_config
from sparkfn.connectors.sink.sink_run import validate_sink
from sparkfn.connectors.source.hosted_source import purge_source, validate_source
from sparkfn.runtime.purge import purge_function
from sparkfn.runtime.query.build import (
    PreparedRun,
    apply_spark_conf,
    prepare,
    resolve_inputs,
    topic_creation,
)
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.autocreate import TopicCreation, ensure_topic
from sparkfn.worker.registry import HostedConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check(
    store: Store,
    config: HostedConfig,
    *,
    spark: Callable[[], SparkSession],
    auto_create_topics: bool,
) -> PreparedRun | None:
    """What a start would refuse, refused before anything is kept; the run it prepared
    (a source has none of a query's checks, so None).

    ``spark`` is called only for a config with Spark settings of its own, which
    the running session must take; ``auto_create_topics`` is the worker's
    ``allow_auto_topic_creation``.
    """
    if isinstance(config, SourceConfig):
        validate_source(store, config, hosted_topic_creation(store, auto_create_topics))
        return None
    if isinstance(config, SinkConfig):
        validate_sink(store, config, hosted_topic_creation(store, auto_create_topics))
        check_configs("sink", config.fqn, config.sink_type, config.configs)
        config = sink_function_config(config)
    if config.spark_conf:  # first: a function refused for it creates no topic
        apply_spark_conf(spark(), config)
    return prepare(store, as_run(config, auto_create_topics=auto_create_topics))


def subscribed(store: Store, config: HostedConfig) -> bool:
    """Whether the run's subscription exists already (a kept one it resumes)."""
    if isinstance(config, SourceConfig):
        return False
    with store.read() as conn:
        return bool(subscription.cursors(conn, config.subscription))


def hosted_topic_creation(store: Store, auto_create_topics: bool) -> TopicCreation:
    """How a source's or sink's missing topics are made, as a function's are: the
    store's setting, off when the worker's ``allow_auto_topic_creation`` is."""
    found = TopicCreation.read(store)
    return found if auto_create_topics else replace(found, enabled=False)


def as_run(config: FunctionConfig, *, auto_create_topics: bool) -> FunctionConfig:
    """``config`` as the worker runs it: no topic created on first use when its
    ``allow_auto_topic_creation`` is off (the registry keeps the config as given)."""
    if auto_create_topics or not config.auto_create_topics:
        return config
    return config.model_copy(update={"auto_create_topics": False})


def subscribe(store: Store, config: FunctionConfig) -> None:
    """Create the function's subscription now if it has none.

    Its ``subscription_position`` then means "as of this call": a message
    produced once ``create`` or ``start`` has returned is processed, even
    if the query takes seconds to start.
    """
    creation = topic_creation(store, config)  # a kept function's deleted input comes back
    topics = [ensure_topic(store, name, creation) for name in resolve_inputs(store, config)]
    with store.write() as conn:
        subscription.ensure(conn, config.subscription, topics, config.subscription_position.value)


def purge(store: Store, config: HostedConfig, *, keep_subscription: bool | None = None) -> None:
    """Remove what the store and the data dir keep for a deleted function, source or sink;
    with ``keep_subscription`` given, its subscription goes unless it is True."""
    if isinstance(config, SourceConfig):
        purge_source(store, config)
        return
    kind = "sink" if isinstance(config, SinkConfig) else "function"
    made = sink_function_config(config) if isinstance(config, SinkConfig) else config
    if keep_subscription is not None:
        made = made.model_copy(update={"cleanup_subscription": not keep_subscription})
    purge_function(store, made, kind=kind)
