"""The parts of the poison-message hunt that need no Spark (issue 28, point 5).

How a worker's crash is recognised in Spark's error, how an exit status
reads, the halving of a failed batch (:class:`~sparkfn.runtime.lifecycle.poison.Hunt`),
the daemon's reaping of a worker that left a note (real forked processes),
and :func:`~sparkfn.runtime.lifecycle.deadletter.dead_letter_input` on both stores.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.redelivery import DELIVER_AT, RECONSUMETIMES
from sparkfn.runtime.function.rows import (
    DLQ_ATTEMPTS,
    DLQ_EXCEPTION,
    DLQ_ORIGIN_MESSAGE_ID,
    DLQ_REAL_TOPIC,
)
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.causes import failure_of, short_error, user_text, user_traceback
from sparkfn.runtime.lifecycle.deadletter import dead_letter_input
from sparkfn.runtime.lifecycle.poison import Hunt, describe_exit, worker_crashed
from sparkfn.runtime.metrics_store import instance_totals, latest_exceptions
from sparkfn.runtime.spark.daemon import ReapingSignals, keep_notes, note_exit_to, notes_dir
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.subscription import Span
from waiting import until

# What pyspark 4 said when a function's os._exit(3) ended its worker (trimmed frames).
CRASHED = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call "
    'last):\n  File ".../sparkfn/runtime/query/staging.py", line 230, in __call__\n'
    "py4j.protocol.Py4JJavaError: An error occurred while calling o86.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 "
    "failed 1 times, most recent failure: Lost task 0.0 in stage 0.0 (TID 0) (192.0.2.2 executor "
    "driver): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). "
    "Consider setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' or"
    "'spark.python.worker.faulthandler.enabled' configuration to 'true' for the better Python "
    "traceback.\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1"
    ".applyOrElse(PythonRunner.scala:1136)\nCaused by: java.io.EOFException\n"
)
# A task whose Python code raised: the worker lived and said why.
RAISED = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling o86.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 "
    "failed 1 times, most recent failure: Lost task 0.0 in stage 0.0 (TID 0): "
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "worker.py", line 1, in main\nRuntimeError: db unreachable\n'
)


def test_a_worker_crash_is_told_from_other_failures() -> None:
    assert worker_crashed(CRASHED)
    assert not worker_crashed(RAISED)
    # The words alone, outside a failed task (a log line quoted in another error), are not one.
    assert not worker_crashed(
        "sparkfn.api.errors.StoreError: Python worker exited unexpectedly (crashed)"
    )
    assert not worker_crashed(
        "function f instance 0 died (FatalError: boom); batch 3 not committed"
    )


def _status_of(action: str) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        if action == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return status


def test_a_spark_error_is_said_without_py4j_call_lines() -> None:
    assert short_error(CRASHED) == (
        "a Python worker exited unexpectedly while running a batch of the query "
        "(its process ended: os._exit, a signal, the OOM killer)"
    )
    assert short_error(RAISED) == "RuntimeError: db unreachable"
    java = (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o86.start.\n"
        ": org.apache.spark.SparkException: the checkpoint is not there\n\tat x.y(Z.java:1)\n"
    )
    assert short_error(java) == "the checkpoint is not there"


def test_a_crash_whose_exit_status_is_known_is_said_with_it_and_the_function() -> None:
    said = (
        "Python worker exited with code 3 while processing a message of function public/default/f"
    )
    assert short_error(f"{said}\n{CRASHED}") == said
    failure, failed = failure_of("public/default/f", [], f"{said}\n{CRASHED}", [0])
    assert (failure.cause.type, failure.cause.message, failed) == ("PythonWorkerCrashed", said, [0])
    # Any other query failure keeps its type.
    assert failure_of("f", [], RAISED, [0])[0].cause.type == "QueryFailed"


def test_an_exceptions_text_is_kept_unless_it_holds_py4j_or_java_words() -> None:
    """What a failed start or restart records, and ``/ready`` says of a session that does
    not answer: sparkfn's own text as it is, a Py4J or Java one in sparkfn's words."""
    mine = "function public/default/f: topic x does not exist\n  create it first"
    assert user_text(mine) == mine
    assert user_text(RAISED) == "RuntimeError: db unreachable"
    assert user_text("An error occurred while calling o33.statusTracker") == (
        "a call into the Spark JVM failed"
    )
    for text in (CRASHED, RAISED, "py4j.protocol.Py4JNetworkError: Answer from Java side is empty"):
        said = user_text(text)
        assert not any(w in said.lower() for w in ("py4j", "org.apache", "java.", " o86.")), said


def test_a_spark_errors_traceback_is_the_users_python_one_without_py4j_or_java() -> None:
    """What status shows as ``deathException.traceback`` (issue 39, point 5): the task's
    Python traceback; never the driver's Py4J call, Java's classes or its stack."""
    assert user_traceback(RAISED) == (
        'Traceback (most recent call last):\n  File "worker.py", line 1, in main\n'
        "RuntimeError: db unreachable\n"
    )
    # A worker that died said no traceback; the one in the text is the driver's Py4J call.
    assert user_traceback(CRASHED) == ""
    java = ": org.apache.spark.SparkException: no\n\tat x.y(Z.java:1)\nCaused by: java.io.EOF\n"
    assert user_traceback(java) == ""
    for error, expected in ((RAISED, user_traceback(RAISED)), (CRASHED, "")):
        cause = failure_of("public/default/f", [], error, [0])[0].cause
        assert cause.traceback == expected
        for name in ("py4j", "Py4J", "org.apache", "java.", "collectToPython"):
            assert name not in cause.traceback and name not in cause.message, (name, cause)


def test_exit_statuses_read_as_a_code_or_a_signal() -> None:
    assert describe_exit(_status_of("exit")) == "exited with code 3"
    assert describe_exit(_status_of("kill")) == "was killed by signal 9 (SIGKILL)"
    assert describe_exit(None) == "exited unexpectedly (its exit status is not known)"


def test_the_daemon_writes_the_status_of_a_worker_that_left_a_note(tmp_path: Path) -> None:
    """In a forked 'daemon' (so the test process's own children are not reaped): its
    SIGCHLD, set to be ignored through :class:`ReapingSignals`, reaps instead."""
    target, quiet = tmp_path / "probe.exit", tmp_path / "quiet.exit"
    daemon = os.fork()
    if daemon == 0:  # pragma: no cover - the daemon
        code = 1
        try:
            signals = ReapingSignals(keep_notes())
            signals.signal(signal.SIGCHLD, signal.SIG_IGN)
            for where, exit_code in ((target, 3), (quiet, 0)):
                ready_r, ready_w = os.pipe()
                worker = os.fork()
                if worker == 0:
                    signals.signal(signal.SIGCHLD, signal.SIG_DFL)
                    note_exit_to(where)
                    os.write(ready_w, b"x")
                    os._exit(exit_code)
                os.close(ready_w)  # a worker gone without writing: EOF, not a hang
                os.read(ready_r, 1)
                os.close(ready_r)
            until(target.exists, f"the exit note {target}", 10, every=0.01)
            time.sleep(0.2)  # the second worker's end too
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(daemon, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status  # not killed
    assert describe_exit(int(target.read_text())) == "exited with code 3"
    assert not quiet.exists()  # a worker that ended well leaves nothing
    notes = notes_dir(daemon)
    # Every note taken, and the folder with the last one: it lives only while it holds notes.
    assert not notes.exists()


def test_no_note_is_left_without_sparkfns_daemon(tmp_path: Path) -> None:
    assert note_exit_to(tmp_path / "x.exit") is None  # pytest's parent keeps no notes


# --- the halving ------------------------------------------------------------------------

T = 7  # a topic id


def test_a_hunt_halves_the_suspects_until_one_crashes_alone() -> None:
    hunt = Hunt.begin([Span(T, 0, 10, 13)])  # a, exit, b at offsets 10..12
    assert (hunt.bad, hunt.budget) == (3, 2 + 3)
    assert hunt.next_probe() == {(T, 0): 11}  # a alone
    assert not hunt.passed({(T, 0): 11})
    hunt.crashed({(T, 0): 11})  # a committed; the batch after it crashed
    assert (hunt.bad, hunt.found) == (2, False)
    assert hunt.next_probe() == {(T, 0): 12}  # exit alone
    hunt.crashed({(T, 0): 11})  # and it crashed
    assert hunt.found
    assert hunt.culprit() == ((T, 0), 11)
    assert hunt.crashes == 3 and hunt.probes == 2


def test_a_one_message_batch_is_run_alone_once_more_and_a_crash_on_all_takes_log_n() -> None:
    single = Hunt.begin([Span(T, 0, 4, 5)])
    assert not single.found  # the failed batch ran without an exit note
    assert single.next_probe() == {(T, 0): 5}
    single.crashed({(T, 0): 4})
    assert single.found

    every = Hunt.begin([Span(T, 0, 0, 64)])
    while not every.found:
        every.next_probe()
        every.crashed({(T, 0): 0})
    assert every.culprit() == ((T, 0), 0)
    assert every.probes == 6  # 32, 16, 8, 4, 2, then 1 alone: log2 of the batch
    assert not every.exhausted


def test_the_order_runs_over_partitions_and_a_commit_past_the_suspects_ends_the_hunt() -> None:
    hunt = Hunt.begin([Span(T, 0, 0, 2), Span(T, 1, 5, 7), Span(T, 2, 3, 3)])
    assert hunt.bad == 4
    assert hunt.advanced(hunt.at, 3) == {(T, 0): 2, (T, 1): 6}
    assert hunt.next_probe() == {(T, 0): 2}
    assert hunt.passed({(T, 0): 2, (T, 1): 7})  # all four committed: a later crash is not theirs
    hunt.crashed({(T, 0): 1, (T, 1): 6})  # committed, but not as a prefix: all left are suspect
    assert hunt.bad == 2


def test_probes_run_out() -> None:
    hunt = Hunt.begin([Span(T, 0, 0, 4)])
    for _ in range(hunt.budget):
        assert not hunt.exhausted
        hunt.next_probe()
    assert hunt.exhausted


# --- dead_letter_input -------------------------------------------------------------------


def _function(store: Store, **fields: object) -> tuple[FunctionConfig, list[str], int]:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    config = FunctionConfig.build(
        name="poisoned", py=__file__, inputs=["in"], subscription_position="earliest", **fields
    )
    ids = Producer(store, "in").send_batch(
        [Message(v.encode(), key="k", properties={"origin": v}) for v in ("a", "exit", "b")],
        partition=1,
    )
    epoch = control.begin_run(store, config.fqfn, "function", 1, "started")
    with store.write() as conn:
        subscription.claim(conn, config.subscription, config.fqfn)
        subscription.ensure(conn, config.subscription, [admin.get("in")], "earliest")
        topic = admin.get("in", conn)
        subscription.skip(conn, config.subscription, (topic.id, 1), 0)  # "a" committed
    return config, [str(i) for i in ids], epoch


def _cursor(store: Store, config: FunctionConfig) -> int:
    topic = TopicAdmin(store).get("in")
    with store.read() as conn:
        return subscription.cursors(conn, config.subscription)[(topic.id, 1)]


def test_dead_letter_input_passes_one_message_in_one_transaction(store: Store) -> None:
    config, ids, epoch = _function(store)
    cause = (
        f"Python worker exited with code 3 while processing message {ids[1]} of public/default/in"
    )

    def passes(offset: int, at_epoch: int = epoch) -> bool:
        return dead_letter_input(
            store,
            config,
            control_id=config.fqfn,
            epoch=at_epoch,
            topic="in",
            partition=1,
            offset=offset,
            cause=cause,
            attempts=3,
        )

    assert not passes(2)  # the cursor is not there: nothing moves
    assert not passes(1, epoch + 1)  # another run's epoch
    assert _cursor(store, config) == 1
    assert passes(1)
    assert _cursor(store, config) == 2
    assert not passes(1)  # once only

    (letter,) = Consumer(
        store, config.default_dead_letter_topic, initial_position="earliest"
    ).receive()
    assert (letter.value, letter.key) == (b"exit", "k")
    assert letter.properties == {
        "origin": "exit",
        DLQ_ORIGIN_MESSAGE_ID: ids[1],
        DLQ_REAL_TOPIC: "persistent://public/default/in-partition-" + ids[1].split(":")[0],
        DLQ_EXCEPTION: f"PythonWorkerCrashed: {cause}",
        DLQ_ATTEMPTS: "3",
    }
    totals = instance_totals(store, config.fqfn)[0]
    assert (totals["received"], totals["system_exceptions"], totals["dead_lettered"]) == (1, 1, 1)
    (info,) = latest_exceptions(store, config.fqfn)[(0, "system")]
    assert (info.exception_string, info.message_id) == (f"PythonWorkerCrashed: {cause}", ids[1])


def test_a_redelivery_that_killed_its_worker_is_dead_lettered_as_its_original(
    store: Store,
) -> None:
    config, ids, epoch = _function(store, max_message_retries=3)
    admin = TopicAdmin(store)
    retry = admin.create(config.retry_topic)
    Producer(store, config.retry_topic).send_batch(
        [
            Message(
                b"exit",
                key="k",
                properties={
                    "origin": "exit",
                    RECONSUMETIMES: "2",
                    DELIVER_AT: "1",
                    DLQ_REAL_TOPIC: "persistent://public/default/in-partition-1",
                    DLQ_ORIGIN_MESSAGE_ID: ids[1],
                },
            )
        ]
    )
    with store.write() as conn:
        subscription.ensure(conn, config.subscription, [retry], "earliest")
    cause = "Python worker exited with code 3 while processing message 1:1 of public/default/in"
    assert dead_letter_input(
        store,
        config,
        control_id=config.fqfn,
        epoch=epoch,
        topic=config.retry_topic,
        partition=0,
        offset=0,
        cause=cause,
    )
    (letter,) = Consumer(
        store, config.default_dead_letter_topic, initial_position="earliest"
    ).receive()
    assert letter.properties == {
        "origin": "exit",
        DLQ_ORIGIN_MESSAGE_ID: ids[1],
        DLQ_REAL_TOPIC: "persistent://public/default/in-partition-1",
        DLQ_EXCEPTION: f"PythonWorkerCrashed: {cause}",
        DLQ_ATTEMPTS: "3",  # its third delivery
    }
    with store.read() as conn:
        assert subscription.cursors(conn, config.subscription)[(retry.id, 0)] == 1


def test_dead_letter_input_drops_when_the_function_drops_failed_messages(store: Store) -> None:
    config, _, epoch = _function(store, drop_failed_messages=True)
    assert dead_letter_input(
        store,
        config,
        control_id=config.fqfn,
        epoch=epoch,
        topic="in",
        partition=1,
        offset=1,
        cause="Python worker was killed by signal 9 (SIGKILL) while processing message 1:1",
    )
    assert _cursor(store, config) == 2
    assert not TopicAdmin(store).exists(config.default_dead_letter_topic)
    assert instance_totals(store, config.fqfn)[0]["system_exceptions"] == 1


@pytest.mark.parametrize("owner", ["public/default/other"])
def test_dead_letter_input_refuses_a_subscription_another_run_owns(
    store: Store, owner: str
) -> None:
    config, _, epoch = _function(store, subscription_name="shared")
    with store.write() as conn:
        subscription.release(conn, "shared")
        subscription.claim(conn, "shared", owner)
    assert not dead_letter_input(
        store,
        config,
        control_id=config.fqfn,
        epoch=epoch,
        topic="in",
        partition=1,
        offset=1,
        cause="x",
    )
    assert _cursor(store, config) == 1
