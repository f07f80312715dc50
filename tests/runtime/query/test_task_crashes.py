"""A function's tasks killed mid-batch, on the real runtime, on SQLite and PostgreSQL.

Each test runs the function in a child process (``localrun_child.py``: one
JVM, in a session of its own, so the driver, the JVM and Spark's Python
daemon and workers are all in it) over a pre-filled topic, with
``funcs/slow_echo_counter.py``: it echoes ``input + "!"`` and counts every
message by its unique first word, so each output and each state change says
how often it landed.

* **A task killed between staging its output and the commit.** The fault
  hook ``SPARKFN_TEST_KILL_AFTER_STAGE`` (``commit.KILL_AFTER_STAGE_ENV``)
  SIGKILLs the driver's process group and the task's worker right after a
  task of batch 1 staged its output, before Spark has its row. Messages are
  large enough that every staged segment is a file (over
  ``segments.INLINE_LIMIT``), so the kill leaves real orphan files.
  Asserted: only batch 0 is visible (outputs and counters); the orphans
  exist, survive topic maintenance while younger than its orphan grace, and
  are deleted by it once older (their clock moved back, not waited for),
  while committed data stays readable and every file the index references
  stays; a restart then drains the input with every output once.
* **Python workers SIGKILLed mid-stream, several times.** The function
  sleeps per message and touches a busy marker named by its pid; the test
  SIGKILLs a Python worker forked by Spark's daemon that touched its marker
  a moment ago (running a task), again and again until Spark's executor has
  logged four tasks failed with "Python worker exited unexpectedly". The
  daemon itself, the planning daemons and the streaming source runner are
  left alone: Spark starts the runner once per query, and its death fails
  the query (a restart then resumes from the subscription). The child runs
  ``local[2,8]``, so Spark retries a failed task as a cluster would
  (``spark.task.maxFailures``). Asserted: the child finishes on its own,
  with no other task failure, and under ``effectively_once`` every output,
  counter increment and received message is counted exactly once.
* **The streaming source runner SIGKILLed mid-stream.** Spark runs one
  ``pyspark.sql.streaming.python_streaming_source_runner`` per query, on the
  driver side (it answers ``latestOffset``, ``partitions`` and ``commit``),
  and does not restart it: its death fails the query. The test kills it once
  the first batch has committed, with most of the input still to read.
  Asserted: the kill left input unprocessed, the supervisor counted one
  restart (``REPLACE_INSTANCE``, the default policy) and recorded no
  ``ERROR``, the child finishes on its own, and under ``effectively_once``
  every output, counter increment and received message is counted exactly
  once. ``until_drained`` is a drain asked at start: the relaunched query
  drains on to the same target.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from sessions import session_processes
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.status import function_status
from sparkfn.state.store import all_state
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics import garbage, segments
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.maintenance import run_maintenance
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.spark.commit import KILL_AFTER_STAGE_ENV
from waiting import until

HERE = Path(__file__).resolve().parents[1]  # tests/runtime: the child and the functions
CHILD = HERE / "localrun_child.py"
FUNCTION = HERE / "funcs" / "slow_echo_counter.py"
NAME = "echo"
FQFN = f"public/default/{NAME}"
PARTITIONS = 2
CHILD_TIMEOUT = 240.0

pytestmark = pytest.mark.slow


def _value(partition: int, offset: int, pad: int) -> str:
    return f"m-{partition}-{offset:04d} " + "p" * pad


def _inputs(per_partition: int, pad: int, batches: range | None = None) -> list[str]:
    """Every input value, or those of ``batches`` when each batch reads 50 per partition."""
    return [
        _value(p, o, pad)
        for p in range(PARTITIONS)
        for o in range(per_partition)
        if batches is None or o // 50 in batches
    ]


def _fill(store: Store, per_partition: int, pad: int) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=PARTITIONS, schema_type="string")
    admin.create("out", partitions=1, schema_type="string")
    producer = Producer(store, "in")
    for p in range(PARTITIONS):
        producer.send_batch(
            [Message(_value(p, o, pad).encode()) for o in range(per_partition)], partition=p
        )


def _read(store: Store, topic: str) -> collections.Counter[str]:
    consumer = Consumer(store, topic, initial_position="earliest")
    found: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        found.update(m.value.decode() for m in batch if m.value is not None)
    return found


def _counters(store: Store) -> collections.Counter[str]:
    state = all_state(store, FQFN)
    return collections.Counter({k: s.counter for k, s in state.items() if s.counter})


def _expected_counters(inputs: list[str]) -> collections.Counter[str]:
    counts = collections.Counter(v.split(maxsplit=1)[0] for v in inputs)
    counts["messages"] = len(inputs)
    return counts


def _received(store: Store) -> int:
    return int(function_status(store, FQFN, 1).instances[0].status.num_received)


def _config_fields(per_batch: int, user_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": NAME,
        "py": str(FUNCTION),
        "classname": "slow_echo_counter.SlowEchoCounter",
        "inputs": ["in"],
        "output": "out",
        "subscription_position": "earliest",
        "processing_guarantees": "effectively_once",
        "max_records_per_batch": per_batch,
        "user_config": user_config,
    }


# --- segment files -----------------------------------------------------------------------


def _segment_files(store: Store) -> set[str]:
    root = store.data_dir / "segments"
    return {
        p.relative_to(store.data_dir).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.suffix in (".arrow", ".tmp")
    }


def _referenced(store: Store) -> set[str]:
    """Files the index references, and retired files waiting for their grace period."""
    with store.read() as conn:
        found = set(
            conn.execute(
                select(schema.segments.c.location).where(schema.segments.c.location.is_not(None))
            ).scalars()
        )
        found.update(conn.execute(select(schema.garbage_files.c.location)).scalars())
    return found


def _age(store: Store, files: set[str], seconds: float) -> None:
    """Move the files' modification time ``seconds`` into the past."""
    for name in files:
        path = store.path(name)
        then = path.stat().st_mtime - seconds
        os.utime(path, (then, then))


# --- the child ---------------------------------------------------------------------------


class Child:
    """One run of ``localrun_child.py`` in a session of its own (the JVM and workers join it)."""

    def __init__(
        self, tmp: Path, store: Store, master: str, fields: dict[str, Any], env: dict[str, str]
    ) -> None:
        spec = {
            "store_url": store.url,
            "data_dir": str(store.data_dir),
            "master": master,
            "functions": [fields],
        }
        spec_path = tmp / "spec.json"
        spec_path.write_text(json.dumps(spec))
        self.log = tmp / "child.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(CHILD), str(spec_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                # The JVM's own log (its executor's task failures) goes to the log file.
                env={**os.environ, "SPARKFN_VERBOSE": "1", **env},
                start_new_session=True,
            )

    def output(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def wait(self) -> int:
        """The child's exit code, after ending whatever it left in its session."""
        try:
            return self.proc.wait(timeout=CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"child did not end within {CHILD_TIMEOUT} s:\n{self.output()}")
        finally:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the child's process group, then anything left in its session."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        # Spark's Python daemon makes a process group of its own, in the child's session.
        for pid in session_processes(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def python_workers(self) -> list[int]:
        """The Python workers Spark's daemon forked for tasks (not the daemon itself, nor
        the planning daemons' workers or the streaming source runner the JVM started)."""
        members = session_processes(self.proc.pid)
        daemons = {
            pid
            for pid, ppid in members.items()
            if _is_task_daemon(pid) and not _is_task_daemon(ppid)
        }
        return [pid for pid, ppid in members.items() if ppid in daemons]


def _argv(pid: int) -> list[bytes]:
    """The command line of ``pid`` (empty once it has ended)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _is_task_daemon(pid: int) -> bool:
    """Whether ``pid`` runs sparkfn's daemon module (the daemon, or a worker it forked)."""
    return _argv(pid)[1:3] == [b"-m", b"sparkfn.runtime.spark.daemon"]


def _drain(spark: Any, store: Store, per_batch: int) -> None:
    """Restart the function on the test's own Spark and run it until the input is drained."""
    config = FunctionConfig.build(**_config_fields(per_batch, {}))
    with FunctionRun(config, store=store, spark=spark) as run:
        drained = run.start(until_drained=True).wait(timeout=CHILD_TIMEOUT)
    assert drained, f"{FQFN} did not drain within {CHILD_TIMEOUT} s"


# --- a task killed after staging ---------------------------------------------------------

STAGE_PER_PARTITION = 200
STAGE_PER_BATCH = 100  # batch b reads offsets [50b, 50b+50) of each partition
STAGE_PAD = 3000  # 50 outputs of a task: ~150 KiB, a file segment
KILLED_BATCH = 1


@pytest.mark.long_running(30)
@pytest.mark.backend("sqlite")
def test_task_killed_after_staging_leaves_no_output_and_no_orphan(
    spark: Any, store: Store, tmp_path: Path
) -> None:
    assert 50 * STAGE_PAD > segments.INLINE_LIMIT
    _fill(store, STAGE_PER_PARTITION, STAGE_PAD)
    before = _segment_files(store)

    child = Child(
        tmp_path,
        store,
        "local[2]",
        _config_fields(STAGE_PER_BATCH, {}),
        {KILL_AFTER_STAGE_ENV: str(KILLED_BATCH)},
    )
    assert child.wait() == -signal.SIGKILL, child.output()

    # Only batch 0 is visible, outputs and state: batch 1 was staged, not committed.
    committed = _inputs(STAGE_PER_PARTITION, STAGE_PAD, range(KILLED_BATCH))
    assert _read(store, "out") == collections.Counter(v + "!" for v in committed)
    assert _counters(store) == _expected_counters(committed)
    assert _received(store) == len(committed)
    # ... and batch 1's staged files are there, referenced by nothing.
    orphans = _segment_files(store) - _referenced(store)
    assert orphans, f"the kill left no staged file: {_segment_files(store) - before}"
    out_dir = f"segments/{TopicAdmin(store).get('out').key}/"
    assert all(name.startswith(out_dir) for name in orphans), orphans
    print(f"{len(orphans)} staged files orphaned by the kill", flush=True)

    # Maintenance keeps an orphan younger than its grace (it may be about to be committed).
    run_maintenance(store)
    assert orphans <= _segment_files(store)
    # Once older, it is deleted; committed data stays, every referenced file with it.
    _age(store, _segment_files(store), 2 * garbage.ORPHAN_GRACE.total_seconds())
    run_maintenance(store)
    files = _segment_files(store)
    assert not orphans & files
    assert files == _referenced(store)
    assert _read(store, "out") == collections.Counter(v + "!" for v in committed)
    every = _inputs(STAGE_PER_PARTITION, STAGE_PAD)
    assert _read(store, "in") == collections.Counter(every)

    # A restart replays batch 1 and drains the rest: every output once.
    _drain(spark, store, STAGE_PER_BATCH)
    assert _read(store, "out") == collections.Counter(v + "!" for v in every)
    assert _counters(store) == _expected_counters(every)
    assert _received(store) == len(every)


# --- Python workers killed mid-stream ----------------------------------------------------

WORKER_PER_PARTITION = 400
WORKER_PER_BATCH = 40  # 20 per partition: 20 batches
WORKER_SLEEP = 0.04  # per message: a task runs at least 0.8 s
FAILED_TASKS = 4  # kill workers until this many tasks failed for it
BUSY_WITHIN = 0.1  # a worker that touched its marker this recently is running a task
KILL_SPACING = 2.5  # seconds between kills: they hit tasks of several batches
TASK_FAILURE = "ERROR Executor: Exception in task"
WORKER_CRASHED = "SparkException: Python worker exited unexpectedly (crashed)"


def _failed_tasks(child: Child, why: str = TASK_FAILURE) -> int:
    """How many tasks failed (``why``: for this reason), as Spark's executor logged it."""
    return child.log.read_text(errors="replace").count(why)


def _kill_busy_workers(child: Child, busy_dir: Path) -> int:
    """SIGKILL Python workers in the middle of a task until :data:`FAILED_TASKS` tasks
    failed or the child ended; returns how many workers were killed."""
    killed = 0

    def enough_failed() -> bool:
        """Kill one busy worker, if any; true once the child ended or enough tasks failed."""
        nonlocal killed
        if child.proc.poll() is not None or _failed_tasks(child) >= FAILED_TASKS:
            return True
        now = time.time()
        for pid in child.python_workers():
            marker = busy_dir / str(pid)
            with contextlib.suppress(FileNotFoundError):
                if now - marker.stat().st_mtime < BUSY_WITHIN:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                    time.sleep(KILL_SPACING)
                    break
        return False

    until(
        enough_failed,
        lambda: f"{FAILED_TASKS} tasks failed by killed Python workers ({killed} killed)",
        CHILD_TIMEOUT,
        every=0.02,
    )
    return killed


@pytest.mark.long_running(50)
@pytest.mark.backend("sqlite")
def test_python_workers_killed_mid_stream_keep_effectively_once(
    store: Store, tmp_path: Path
) -> None:
    _fill(store, WORKER_PER_PARTITION, pad=0)
    busy_dir = tmp_path / "busy"
    busy_dir.mkdir()
    user_config = {"sleep_seconds": WORKER_SLEEP, "busy_dir": str(busy_dir)}
    child = Child(
        tmp_path,
        store,
        "local[2,8]",  # a failed task is retried, up to 8 attempts
        _config_fields(WORKER_PER_BATCH, user_config),
        {},
    )
    try:
        killed = _kill_busy_workers(child, busy_dir)
    finally:
        code = child.wait()
    failed = _failed_tasks(child)
    print(f"{killed} Python workers killed, {failed} of them running a task", flush=True)
    output = child.output(20_000)
    assert failed >= FAILED_TASKS, f"only {failed} kills hit a task before the end:\n{output}"
    assert _failed_tasks(child, WORKER_CRASHED) == failed, output  # no other failure
    assert code == 0, output  # Spark retried every failed task: the query never failed

    every = _inputs(WORKER_PER_PARTITION, pad=0)
    assert _read(store, "out") == collections.Counter(v + "!" for v in every)
    assert _counters(store) == _expected_counters(every)
    assert _received(store) == len(every)


# --- the streaming source runner killed mid-stream ---------------------------------------

RUNNER_PER_PARTITION = 200
RUNNER_PER_BATCH = 40  # 20 per partition: 10 batches
RUNNER_SLEEP = 0.03  # per message: a batch runs at least 0.6 s
SOURCE_RUNNER = [b"-m", b"pyspark.sql.streaming.python_streaming_source_runner"]


def _wait_for_batch(child: Child, batch: int) -> None:
    """Wait until the child has printed that ``batch`` completed."""
    line = f" {NAME} batch {batch}\n"

    def printed() -> bool:
        if line in child.log.read_text(errors="replace"):
            return True
        if child.proc.poll() is not None:
            pytest.fail(f"the child ended without printing {line.strip()!r}:\n{child.output()}")
        return False

    until(
        printed,
        lambda: f"the child to print {line.strip()!r}:\n{child.output()}",
        CHILD_TIMEOUT,
        every=0.05,
    )


def _source_runners(child: Child) -> list[int]:
    """The streaming source runners the JVM started in the child's session."""
    return [pid for pid in session_processes(child.proc.pid) if _argv(pid)[1:3] == SOURCE_RUNNER]


@pytest.mark.long_running(30)
@pytest.mark.backend("postgresql")
def test_source_runner_killed_mid_stream_restarts_the_query_effectively_once(
    store: Store, tmp_path: Path
) -> None:
    _fill(store, RUNNER_PER_PARTITION, pad=0)
    user_config = {"sleep_seconds": RUNNER_SLEEP}
    child = Child(tmp_path, store, "local[2]", _config_fields(RUNNER_PER_BATCH, user_config), {})
    try:
        _wait_for_batch(child, 0)
        (runner,) = _source_runners(child)
        os.kill(runner, signal.SIGKILL)
        written_at_kill = sum(_read(store, "out").values())
    finally:
        code = child.wait()
    output = child.output(20_000)
    transitions = control.transitions_of(store, FQFN)
    print(f"source runner {runner} killed after {written_at_kill} outputs", flush=True)
    every = _inputs(RUNNER_PER_PARTITION, pad=0)
    assert 0 < written_at_kill < len(every), "the kill did not hit the run mid-stream"
    assert code == 0, f"{output}\n{transitions}"
    # The query failed and the default policy (REPLACE_INSTANCE) restarted it once.
    moves = [t["to"] for t in transitions if t["instance"] is None]
    assert "RESTARTING" in moves, transitions
    assert "ERROR" not in moves, transitions
    assert function_status(store, FQFN, 1).num_restarts == 1, transitions

    assert _read(store, "out") == collections.Counter(v + "!" for v in every)
    assert _counters(store) == _expected_counters(every)
    assert _received(store) == len(every)
