"""Building and starting the Spark streaming query of a function.

::

    topic source(inputs, instances, assignment,
                 taskFunction=run_and_stage)  # in each read task: user code + Context,
                                              # then staged segments; one row out
       -> foreachBatch(commit)                # on the driver: one transaction per batch

The function runs inside the source's own tasks (see
:mod:`sparkfn.topics.spark.tasks`), so its input and output messages never
enter the JVM; ``key_shared`` gets one task per instance from the source
instead of a shuffle.

Before starting, the driver validates everything it can (topics exist, the
code loads), so bad input fails with a clear message instead of a Spark
stack trace.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sparkfn.api.errors import ConfigError, TopicNotFoundError
from sparkfn.config.function import FunctionConfig, ProcessingGuarantee
from sparkfn.config.topics_pattern import TopicsPattern
from sparkfn.runtime.function.loader import load_function
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.commit import (
    COMMIT_SCHEMA,
    BatchCommitter,
    FunctionBatchWriter,
    stage_in_task,
)
from sparkfn.runtime.query.executor import make_run_function
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.autocreate import TopicCreation, ensure_topic
from sparkfn.topics.spark.source import SparkfnDataSource
from sparkfn.topics.spark.tasks import (
    TASK_FUNCTION_OPTION,
    TASK_SCHEMA_OPTION,
    encode_task_function,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from sparkfn.runtime.lifecycle.poison import Probe

ADMISSION = "sparkfn.runtime.query.admission:RunAdmission"
REGISTER_LOCK = threading.Lock()


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

    def current_inputs(self, store: Store) -> list[str]:
        """The input topics now: the prepared ones, or a pattern's matches of now."""
        if self.config.topics_pattern:
            return resolve_inputs(store, self.config)
        return list(self.inputs)


def prepare(store: Store, config: FunctionConfig) -> PreparedRun:
    """Check the function's topics exist and its code loads, once; see :class:`PreparedRun`."""
    return PreparedRun(config, tuple(validate(store, config)))


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


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the JVM thread's active session.

    The active session is per thread; Spark looks up Python data sources
    through it, so a query (re)started from a supervisor thread would not
    find ``sparkfn`` otherwise.
    """
    jvm = spark._jvm  # noqa: SLF001 - no public API for this
    spark._get_j_spark_session_class(jvm).setActiveSession(spark._jsparkSession)  # noqa: SLF001


def start_function_query(
    spark: SparkSession,
    store: Store,
    prepared: PreparedRun,
    *,
    until_drained: bool = False,
    version: str = "1",
    checkpoint: Path | None = None,
    epoch: int = 0,
    kind: str = "function",
    probe: Probe | None = None,
) -> StreamingQuery:
    """Build and start the ``prepared`` function's streaming query; returns the ``StreamingQuery``.

    It checks nothing of the function: :func:`prepare` did, once.

    The query reads from the function's subscription (``config.subscription``)
    and moves it in the sink's commit, so ``checkpoint`` (default under the
    data dir) only saves Spark work: a new or lost one resumes from the
    subscription. ``until_drained`` uses ``Trigger.AvailableNow``
    (unsupervised runs); a supervised run drains through its control record
    instead, and passes the ``epoch`` of the run, which the sink's commit
    checks. ``kind`` (``function`` or ``sink``) names the record
    (:func:`sparkfn.runtime.lifecycle.control.control_id`), the checkpoint and the query.
    ``probe``: the query starts by reading part of a batch that crashed a
    Python worker (:mod:`sparkfn.runtime.lifecycle.poison`).
    """
    config = prepared.config
    inputs = prepared.current_inputs(store)
    adopt_pattern_topics(store, config, inputs)
    control_id = control.control_id(kind, config.fqfn)
    activate(spark)
    apply_spark_conf(spark, config)
    location = {"storeUrl": store.url, "dataDir": str(store.data_dir)}
    reader = (
        spark.readStream.format("sparkfn")
        .options(**location)
        .option("topics", ",".join(inputs))
        .option("startingOffsets", config.subscription_position.value)
        .option("subscription", config.subscription)
        .option("epoch", str(epoch))
        .option("instances", str(config.parallelism))
        .option("assignment", config.subscription_type.value)
        # A drain's last batch ends the stream itself when that costs no cores.
        .option("taskSlots", str(spark.sparkContext.defaultParallelism))
        .option("controlId", control_id)
        .option("admission", ADMISSION)
        # What the Context can expose; publish_time, producer and sequence_id it cannot.
        .option("columns", "key,value,properties,event_time,topic,partition,offset")
    )
    if config.topics_pattern:  # topics created while it runs are read too
        reader = reader.option("topicsPattern", config.topics_pattern)
    if config.max_records_per_batch:
        reader = reader.option("maxRecordsPerBatch", str(config.max_records_per_batch))
    if config.max_bytes_per_batch:
        reader = reader.option("maxBytesPerBatch", str(config.max_bytes_per_batch))
    if config.processing_guarantees is ProcessingGuarantee.AT_MOST_ONCE:
        reader = reader.option("ackOnPlan", "true")  # a failed batch is never read again
    if probe is not None and probe.ends:
        reader = reader.option("probeEnds", probe.option())
    window = config.window_config
    if window is not None and window.ticks_ms is not None and not until_drained:
        reader = reader.option("tickMs", str(window.ticks_ms))  # windows fire on the clock
    committer = FunctionBatchWriter(
        config, store.url, str(store.data_dir), epoch=epoch, control_id=control_id
    )
    run = make_run_function(
        config,
        store.url,
        str(store.data_dir),
        version,
        epoch,
        control_id,
        exit_note=str(probe.exit_file) if probe is not None else None,
    )
    reader = reader.option(
        TASK_FUNCTION_OPTION, encode_task_function(stage_in_task(committer, run))
    ).option(TASK_SCHEMA_OPTION, COMMIT_SCHEMA)
    with REGISTER_LOCK:
        # Each query gets a registration of its own. A registered Python data
        # source is one Spark PythonFunction, environment map included, that
        # every query loaded from it shares; Spark fills that map in while it
        # starts a query's Python runners, so a query starting beside another
        # one could corrupt the other's task serialization (seen as
        # java.io.OptionalDataException in a task). Registered now, the
        # function's workers also get the SparkContext's environment of now,
        # as a mapInArrow defined now would.
        spark.dataSource.register(SparkfnDataSource)
        staged = reader.load()
    writer = (
        staged.writeStream.foreachBatch(BatchCommitter(committer))
        .option("checkpointLocation", str(checkpoint or checkpoint_dir(store, config, kind)))
        .queryName(control_id.replace("/", "_"))
    )
    if until_drained:
        writer = writer.trigger(availableNow=True)
    elif trigger_ms(config) > 0:
        writer = writer.trigger(processingTime=f"{trigger_ms(config)} milliseconds")
    return writer.start()


def trigger_ms(config: FunctionConfig) -> int:
    """The least time between the function's batches: ``trigger_interval``, and for
    event-time windows at least ``watermarkEmitIntervalMs``: the watermark advances
    once per batch, so no more often than Pulsar would emit it."""
    interval = int(config.trigger_interval * 1000)
    window = config.window_config
    if window is not None and window.event_time:
        interval = max(interval, window.watermark_interval)
    return interval
