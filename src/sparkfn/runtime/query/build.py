"""What a function's start needs before its query: its checks, its settings, its checkpoint.

A function's (or a sink's) query is a group's (:mod:`sparkfn.runtime.group`;
alone, a group of one: :mod:`sparkfn.runtime.group.solo`). Before it
starts, the driver validates everything it can (topics exist, the code
loads) once (:func:`prepare`), so bad input fails with a clear message
instead of a Spark stack trace.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sparkfn.api.errors import ConfigError, TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.config.topics_pattern import TopicsPattern
from sparkfn.runtime.function.loader import load_function
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.autocreate import TopicCreation, ensure_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def checkpoint_dir(store: Store, config: FunctionConfig, kind: str = "function") -> Path:
    """Where the Spark checkpoint of a function (or a sink: ``kind``) lives.

    ``<data dir>/functions/<tenant>/<namespace>/<name>/checkpoint`` (``sinks/``
    for a sink, so that a function and a sink of the same name never share
    one). An optimisation only: the subscription is the position.
    """
    return (
        store.data_dir / f"{kind}s" / config.tenant / config.namespace / config.name / "checkpoint"
    )


def resolve_inputs(store: Store, config: FunctionConfig) -> list[str]:
    """The input topics: ``inputs``, plus existing topics matching ``topics_pattern``."""
    topics = list(config.inputs)
    if config.topics_pattern:
        pattern = TopicsPattern.parse(config.topics_pattern)
        for info in TopicAdmin(store).list(pattern.tenant, pattern.namespace_name):
            name = str(info.name)
            if pattern.matches(name) and name not in topics:
                topics.append(name)
    if not topics:
        msg = f"function {config.fqfn}: topics_pattern {config.topics_pattern!r} matches no topic"
        raise ConfigError(msg)
    return topics


def check_topics_exist(
    store: Store,
    owner: str,
    topics: Iterable[tuple[str, str | None]],
    creation: TopicCreation | None = None,
) -> None:
    """A :class:`ConfigError` naming ``owner`` (``function x``, ``sink x``), the
    field and the topic for the first ``(field, topic)`` whose topic does not
    exist; with ``creation`` enabled such a topic is created instead
    (:mod:`sparkfn.topics.autocreate`)."""
    off = TopicCreation(enabled=False)
    for field, topic in topics:
        if topic is None:
            continue
        try:
            ensure_topic(store, topic, creation or off)
        except TopicNotFoundError:
            msg = f"{owner}: {field} topic {topic} does not exist; create it first"
            if creation is not None:  # it was off, not just not asked for
                msg += " (topics are not created on first use here)"
            raise ConfigError(msg) from None


def topic_creation(store: Store, config: FunctionConfig) -> TopicCreation:
    """How ``config``'s missing topics are created: the store's setting, off when
    the function's ``auto_create_topics`` is."""
    found = TopicCreation.read(store)
    return found if config.auto_create_topics else replace(found, enabled=False)


def validate(store: Store, config: FunctionConfig) -> list[str]:
    """Check (or create, see :func:`topic_creation`) the topics and that the code
    loads; returns the input topics. The code is loaded first: a function refused for
    its code creates no topic."""
    load_function(config)
    check_topics_exist(
        store,
        f"function {config.fqfn}",
        [
            *(("inputs", t) for t in config.inputs),
            ("output", config.output),
            ("log_topic", config.log_topic),
            ("dead_letter_topic", config.dead_letter_topic),
            (
                "windowConfig.lateDataTopic",
                config.window_config.late_data_topic if config.window_config else None,
            ),
        ],
        topic_creation(store, config),
    )
    return resolve_inputs(store, config)


@dataclass(frozen=True)
class PreparedRun:
    """A function checked once before it starts: its topics found, its code loaded.

    Made by :func:`prepare` where a start is decided (a worker's create or
    update, ``localrun``); the run's start and every restart of its query use
    it, so neither the code nor the topics are looked at again. A pattern
    function's inputs are resolved again at each (re)start
    (:meth:`current_inputs`): topics may appear while it runs.
    """

    config: FunctionConfig
    inputs: tuple[str, ...]
    # The registered version the config is (a worker's registry; "1" for localrun): the
    # key of the objects its tasks make, so an update's objects are never the old ones.
    version: str = "1"

    def current_inputs(self, store: Store) -> list[str]:
        """The input topics now: the prepared ones, or a pattern's matches of now."""
        if self.config.topics_pattern:
            return resolve_inputs(store, self.config)
        return list(self.inputs)


def prepare(store: Store, config: FunctionConfig, version: str = "1") -> PreparedRun:
    """Check the function's topics exist and its code loads, once; see :class:`PreparedRun`."""
    return PreparedRun(config, tuple(validate(store, config)), version)


def adopt_pattern_topics(store: Store, config: FunctionConfig, inputs: list[str]) -> None:
    """Subscribe an existing subscription to the topics its ``topics_pattern`` gained, from their start.

    A topic that appears while a pattern function is subscribed holds only
    messages produced after the subscription began, so none of them may be
    skipped, whatever ``subscription_position`` says (it applies to the
    topics there when the subscription was made). A running query's reader
    adopts the topics created while it runs the same way
    (:mod:`sparkfn.topics.discovery`); this covers those created while
    nothing ran.
    """
    added = [name for name in inputs if name not in config.inputs]
    if not config.topics_pattern or not added:
        return
    admin = TopicAdmin(store)
    topics = [admin.get(name) for name in added]
    with store.write() as conn:
        subscription.adopt(conn, config.subscription, topics)


def apply_spark_conf(spark: SparkSession, config: FunctionConfig) -> None:
    """Set the function's ``spark_conf`` on a running session.

    Settings the session already has (e.g. given when it was created, which
    is the only way for core settings like ``spark.executor.memory``) are
    left alone; one Spark refuses to change at run time is a clear error.
    """
    for key, value in config.spark_conf.items():
        if spark.conf.get(key, None) == value:
            continue
        try:
            spark.conf.set(key, value)
        except Exception as exc:
            msg = (
                f"function {config.fqfn}: spark_conf {key}={value!r} cannot be set on a running "
                f"Spark session ({type(exc).__name__}); set it when the session is created"
            )
            raise ConfigError(msg) from None


def trigger_ms(config: FunctionConfig) -> int:
    """The least time between the function's batches: ``trigger_interval``, and for
    event-time windows at least ``watermarkEmitIntervalMs``: the watermark advances
    once per batch, so no more often than Pulsar would emit it."""
    interval = int(config.trigger_interval * 1000)
    window = config.window_config
    if window is not None and window.event_time:
        interval = max(interval, window.watermark_interval)
    return interval
