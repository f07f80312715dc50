"""Dead-lettering one input message of a run on its own, outside any batch.

A message that raises in ``process()`` is dead-lettered by its task, and
commits with its batch (:mod:`sparkfn.runtime.function.instance`). A
message that kills its Python worker never gets that far: its batch fails
as a whole. Once the supervisor has found it
(:mod:`sparkfn.runtime.lifecycle.poison`), :func:`dead_letter_input`
passes it in one store transaction, the group runtime's likewise.

>>> dead_letter_input(store, config, control_id=config.fqfn, epoch=7,
...                   topic="public/default/in", partition=0, offset=17,
...                   cause="Python worker exited with code 3 while processing message 0:17")
True
"""

from __future__ import annotations

import time
import uuid

from sqlalchemy import select

from sparkfn.api.errors import PythonWorkerCrashed, TopicExistsError, TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.function.redelivery import REDELIVERY_COLUMN, as_delivered
from sparkfn.runtime.function.rows import InputRows
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.metrics_store import commit_stats
from sparkfn.runtime.stats import ExceptionInfo, InstanceStats
from sparkfn.store import signals
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.append import MessageColumns
from sparkfn.topics.log import commit_segments, partition_for_key, stage
from sparkfn.topics.message import SchemaType
from sparkfn.topics.reading import read_range

# The type a dead letter's EXCEPTION property and the system exception name.
WORKER_CRASHED = "PythonWorkerCrashed"


def dead_letter_topic(admin: TopicAdmin, config: FunctionConfig, name: str) -> TopicInfo:
    """The dead-letter topic ``name`` of ``config``; the default one is created on first use.

    The default (``{tenant}/{namespace}/{name}-DLQ``) gets one partition and
    the inputs' schema when they share one (dead letters are the inputs'
    values as received), else ``BYTES``. Any other topic must exist. A window
    function's default late-data topic (``{tenant}/{namespace}/{name}-late``)
    and the retry topic of its negative acks (``config.retry_topic``) are made
    the same way.
    """
    made = (config.default_dead_letter_topic, config.default_late_data_topic, config.retry_topic)
    if name not in made:
        return admin.get(name)
    try:
        return admin.get(name)
    except TopicNotFoundError:
        inputs = [admin.get(topic) for topic in config.inputs]
        schemas = {(info.schema_type, info.schema_definition) for info in inputs}
        kind, definition = schemas.pop() if len(schemas) == 1 else (SchemaType.BYTES, None)
        try:
            return admin.create(name, partitions=1, schema_type=kind, schema_definition=definition)
        except TopicExistsError:  # created meanwhile (another task, another run)
            return admin.get(name)


def dead_letter_input(
    store: Store,
    config: FunctionConfig,
    *,
    control_id: str,
    epoch: int,
    topic: str,
    partition: int,
    offset: int,
    cause: str,
    attempts: int = 1,
    instance_id: int = 0,
) -> bool:
    """Dead-letter input message ``partition:offset`` of ``topic`` of run ``control_id`` with ``cause``.

    In one store transaction, and only while run ``epoch`` is the current
    one, ``control_id`` owns the function's subscription and its cursor on
    that partition is still at ``offset``:

    * the message goes to the function's dead-letter topic
      (``config.dead_letter_target``; nothing with ``drop_failed_messages``)
      with the properties a message that raised gets
      (:meth:`~sparkfn.runtime.function.rows.InputRows.dead_letter`):
      ``ORIGIN_MESSAGE_ID``, ``REAL_TOPIC``, ``EXCEPTION`` (here
      ``PythonWorkerCrashed: <cause>``) and ``ATTEMPTS`` (``attempts``),
      beside its own;
    * the cursor moves past it (:func:`sparkfn.topics.subscription.skip`);
    * instance ``instance_id``'s stats count it received, dead-lettered and
      as a system exception (``numSystemExceptions``, ``latestSystemExceptions``
      with ``cause`` and the message id).

    Returns ``False``, having changed nothing, when any of those conditions
    does not hold (the message was committed or passed already, or a newer
    run owns the function) or the message is no longer stored. Called by the supervisor's thread (and the group
    runtime's), never inside a Spark task.
    """
    admin = TopicAdmin(store)
    source = admin.get(topic)
    found = next(read_range(store, source, partition, offset, offset + 1), None)
    if found is None or found.num_rows == 0:
        return False  # expired: the reader passes it anyway
    if str(source.name) == str(TopicName.parse(config.retry_topic)):
        # A redelivery that killed its worker: dead-lettered as its original, as it was given.
        found = next(as_delivered(iter([found]), str(source.name)))
        attempts = max(attempts, 1 + int(found.column(REDELIVERY_COLUMN)[0].as_py()))
    rows = InputRows(found)
    error = PythonWorkerCrashed(cause)
    target = config.dead_letter_target
    staged = None
    dlq: TopicInfo | None = None
    if target is not None:
        dlq = dead_letter_topic(admin, config, target)
        letter = rows.dead_letter(0, target, error, attempts)
        columns = MessageColumns()
        columns.add(
            letter.value, letter.key, list(letter.properties.items()), letter.event_time, None
        )
        part = partition_for_key(letter.key, dlq.partitions) if letter.key else 0
        staged = stage(store, dlq, part, columns.table(None, utc_now()))
    stats = InstanceStats(received=1, dead_lettered=1 if dlq is not None else 0)
    stats.record_exception(
        ExceptionInfo(
            "system", WORKER_CRASHED, cause, "", rows.message_id(0), int(time.time() * 1000)
        )
    )
    with store.write() as conn:
        runs = control.runs
        query = select(runs.c.epoch).where(runs.c.fqfn == control_id)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()  # as the sink's commit: a new run's epoch waits
        current = conn.execute(query).scalar()
        if current is not None and current != epoch:
            return False
        name = config.subscription
        if subscription.owner_of(conn, name, lock=True) != control_id:
            return False
        subscription.cursors(conn, name, lock=True)  # locked in the order a commit locks them
        if not subscription.skip(conn, name, (source.id, partition), offset):
            return False
        if dlq is not None and staged is not None:
            commit_segments(store, conn, dlq, [staged], uuid.uuid4().hex)
        commit_stats(conn, control_id, [(instance_id, stats)])
        signals.hint_on_commit(conn, signals.control_hint(control_id))
    return True
