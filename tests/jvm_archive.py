"""A class-data-sharing archive of Spark's classes for every JVM of a test run.

A Spark driver JVM spends most of its start loading and verifying Spark's
classes: about 18 s of CPU on the two-core test machine, and a run starts
about a hundred of them (the session's, shared and crash-test workers,
``functions localrun`` children). With a dynamic CDS archive
(``-XX:SharedArchiveFile``, JDK 13+) of the classes one Spark session loads,
the same start takes about 9 s. This is about wall time only: the JVM runs the
same classes, mapped from the archive instead of parsed from the jars.

:func:`class_archive` makes the archive once per Java, pyspark and JVM
options (a file in the system's temp directory, under a lock, reused by
later runs) by starting one Spark session with ``-XX:ArchiveClassesAtExit``.
A JVM whose class path does not match the archive (a standalone cluster's
daemons) runs without it; ``-Xlog:cds=off`` keeps that silent, as a JVM
without the archive is.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Options every JVM that uses the archive takes besides the archive's path.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

# One session's work, so that the archive holds what a test's JVM loads first:
# a batch job with a Python UDF (Arrow), and a streaming query's first batch.
_WORKLOAD = """
import os, sys, tempfile, time
from pyspark.sql.functions import col
from sparkfn.runtime.spark.session import spark_session

spark = spark_session(master="local[1]", app_name="sparkfn-test-archive")
df = spark.range(100).select((col("id") % 3).alias("k"))
df.groupBy("k").count().collect()
df.mapInArrow(lambda batches: batches, df.schema).collect()
with tempfile.TemporaryDirectory() as folder:
    with open(os.path.join(folder, "one.json"), "w") as file:
        file.write('{"v": 1}\\n')
    stream = spark.readStream.schema("v long").json(folder)
    query = stream.writeStream.format("noop").trigger(availableNow=True).start()
    query.awaitTermination(300)
print("jvm-pid", spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid(), flush=True)
spark.stop()
# The JVM outlives spark.stop(): it exits (writing the archive) when this process has
# exited and closed its end of the gateway's pipe; the parent waits for it.
"""


def _jvm_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _wait_for_jvm(said: str, timeout: float) -> None:
    """Wait for the workload's JVM (its pid printed on ``said``) to exit: it writes the
    archive as it exits."""
    pids = [int(line.split()[1]) for line in said.splitlines() if line.startswith("jvm-pid ")]
    deadline = time.monotonic() + timeout
    while pids and not _jvm_gone(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.1)


def _key(base_options: str) -> str:
    import pyspark

    java = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, timeout=60, check=False
    ).stderr
    jars = sorted(
        f"{p.name}:{p.stat().st_size}" for p in (Path(pyspark.__file__).parent / "jars").iterdir()
    )
    from sparkfn.runtime.spark.checkpoints import jar_path

    # The sessions' class path holds sparkfn's checkpoint jar too, named by its source.
    text = "\n".join([java, pyspark.__version__, base_options, sys.executable, *jars])
    text += "\n" + str(jar_path())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def class_archive(base_options: str) -> Path | None:
    """The archive for JVMs started with ``base_options`` (made if missing); None if it
    cannot be made (the run goes on without it, each JVM a little slower)."""
    try:
        archive = (
            Path(tempfile.gettempdir()) / f"sparkfn-test-jvm-{os.getuid()}-{_key(base_options)}.jsa"
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if archive.is_file():
        return archive
    with open(f"{archive}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.is_file():  # another run made it meanwhile
            return archive
        building = archive.with_suffix(f".{os.getpid()}.building")
        env = dict(os.environ)
        env["SPARK_SUBMIT_OPTS"] = f"{base_options} {QUIET} -XX:ArchiveClassesAtExit={building}"
        began = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-c", _WORKLOAD],
                env=env, capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            done = None
        if done is not None and done.returncode == 0:
            _wait_for_jvm(done.stdout, timeout=300)
        if done is None or done.returncode != 0 or not building.is_file():
            with contextlib.suppress(FileNotFoundError):
                building.unlink()
            said = "timed out" if done is None else done.stderr.strip()[-2000:]
            print(
                f"no JVM class archive for the tests (each JVM starts slower): {said}",
                file=sys.stderr,
            )
            return None
        building.rename(archive)
        print(
            f"made the tests' JVM class archive in {time.monotonic() - began:.0f} s: {archive}",
            file=sys.stderr,
        )
    return archive
