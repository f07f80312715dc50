"""Creating the SparkSession sparkfn runs on.

sparkfn points Spark's Python workers at the interpreter running sparkfn
(``PYSPARK_PYTHON``), so a user never has to, and registers the ``sparkfn``
data source. Four settings only make Python processes cheaper to start or
to talk to:

* The daemon they are forked from is :mod:`sparkfn.runtime.spark.daemon`, which
  has already imported the thread-free part of what sparkfn's tasks import.
* With the pip-installed pyspark, ``SPARK_HOME`` is a copy of it made of
  symlinks, minus ``python/lib/pyspark.zip``. Spark puts that zip first on
  every Python process's path, and zipimport keeps no bytecode: each daemon,
  each data-source planning process (one per query start) and each task's
  ``importlib.invalidate_caches()`` would compile or re-index pyspark from
  the zip. Without it they import the same pyspark from the installed
  package, compiled once by pip. A ``SPARK_HOME`` the user set is kept.
* With a local master and no ``PYSPARK_PYTHON`` of the user's, each
  query's source runner is forked by a zygote with its imports done
  (:mod:`sparkfn.runtime.spark.zygote`), through the launcher Spark runs as its
  Python (:mod:`sparkfn.runtime.spark.launch`).
* With the zygote, Spark talks to its Python processes over Unix
  sockets, not loopback TCP. Over TCP each query's source runner waited
  out two delayed acknowledgements (50 ms each) before it had its data
  source, and a sink's writer tasks and commit runner more: a
  1,000-message topic copy took 0.98 s, now 0.75 s. A local session's
  sockets go in ``<temp>/sparkfn-sockets-<uid>``, cleared of the ones
  killed processes left (:func:`socket_dir`).

>>> spark = spark_session()            # local[*]
>>> spark.readStream.format("sparkfn").option("topic", "orders").load()
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sparkfn.runtime.spark import checkpoints

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import SparkSession

# See DEFAULT_CONF's spark.driver.defaultJavaOptions.
JIT_OPTIONS = "-XX:TieredStopAtLevel=1"

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Streaming progress is reported by sparkfn; Spark's own is noise at INFO.
    "spark.sql.streaming.metricsEnabled": "false",
    "spark.python.worker.reuse": "true",
    "spark.python.daemon.module": "sparkfn.runtime.spark.daemon",
    # An idle query asks its source for new offsets after this pause. Each
    # ask is a round trip to the query's Python source process and a store
    # read: at Spark's 10 ms an idle function kept a fifth of a core busy.
    # A message arriving after a quiet spell waits at most this much longer.
    "spark.sql.streaming.pollingDelay": "100ms",
    # Local files without Hadoop's checksum side files (`.x.crc` beside each
    # `x`). Every micro-batch writes two checkpoint files (the offsets before
    # it, the commit after), each a temp file and a rename; with checksums
    # they took 56-61 ms each, without them 31-34 ms (latency.py at 1k msg/s:
    # p50 342-374 -> 291-308 ms). sparkfn's exactly-once does not rest on the
    # checkpoint (the store's subscription does), and Spark's atomic rename
    # is the same. Other file:// writes of the session skip the side files
    # too; a user's own conf of these keys wins.
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    # Checkpoint files through Hadoop's FileSystem API, not FileContext (and, where a
    # javac builds it, without its chmod either: sparkfn.runtime.spark.checkpoints).
    # Without Hadoop's native library (pyspark ships none) FileContext's
    # rename forks `readlink` twice and the file's creation forks `chmod`:
    # three child processes of the driver's JVM per checkpoint file, two
    # files per micro-batch, 27-28 ms a file. The FileSystem API renames
    # with one rename(2) (its create still forks the chmod): 7-8 ms. Like
    # FileContext it refuses to replace an existing batch's entry.
    "spark.sql.streaming.checkpointFileManagerClass": checkpoints.SPARK_MANAGER,
    # The driver's JVM compiles with C1 only. What it runs for sparkfn is Spark's
    # planning, scheduling and commit code, wide and each method a few times a
    # micro-batch: C2 reached its thresholds over minutes and its compiler threads
    # took 30-40 % of a core for the first minutes of a worker's life (a third of
    # the JVM's CPU after 6 minutes), while no message passes through JVM code.
    # Measured alone (benchmarks/README.md, 2026-11-29, eighth session): 200
    # functions x 5 msg/s 110.8 -> 92.3 % of a core, p99 444 -> 319 ms; one
    # function at 1 k msg/s p99 806 -> 279 ms; per-record 0.80 -> 0.66 s for
    # 500 k messages. A native Spark job in this session runs its own JVM code
    # about a third slower (Parquet in and out: 0.87 -> 1.18 s). Spark puts these
    # options before ``spark.driver.extraJavaOptions``, so a user's
    # ``-XX:TieredStopAtLevel=4`` there (or their own value of this key) wins.
    "spark.driver.defaultJavaOptions": JIT_OPTIONS,
}


def use_project_interpreter(*, zygote: bool = False) -> None:
    """Make Spark's Python workers (and driver) run this interpreter, from an unzipped pyspark.

    With ``zygote`` (a local master, and no Python executable of the
    user's), Spark's Python processes start through
    :mod:`sparkfn.runtime.spark.launch`, and a :mod:`~sparkfn.runtime.spark.zygote`
    forks the queries' source runners with their imports done.
    """
    from sparkfn.runtime.spark.launch import SCRIPT, ZYGOTE_ENV

    # The launcher inherited from a parent process is that process's, not a
    # choice of the user's: its zygote serves that process's Spark only.
    ours = _zygote is not None and _zygote.poll() is None  # a session started here before
    if not ours and Path(os.environ.get("PYSPARK_PYTHON", "")).name == SCRIPT:
        for name in ("PYSPARK_PYTHON", ZYGOTE_ENV):
            os.environ.pop(name, None)
        if Path(os.environ.get("PYSPARK_DRIVER_PYTHON", "")).name == SCRIPT:
            os.environ.pop("PYSPARK_DRIVER_PYTHON")
    if zygote and "PYSPARK_PYTHON" not in os.environ:
        launcher = start_zygote()
        if launcher is not None:
            os.environ["PYSPARK_PYTHON"] = str(launcher)
            # Spark starts the data sources' lookup with the driver's Python
            # (unless the user chose one: sparkfn's own default is this interpreter).
            if os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable) == sys.executable:
                os.environ["PYSPARK_DRIVER_PYTHON"] = str(launcher)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if "SPARK_HOME" not in os.environ:
        home = spark_home_without_zip()
        if home is not None:
            os.environ["SPARK_HOME"] = str(home)


_zygote: subprocess.Popen[bytes] | None = None


def zygote_serves() -> bool:
    """Whether this process's zygote runs and Spark's Python is its launcher."""
    from sparkfn.runtime.spark.launch import SCRIPT

    ours = _zygote is not None and _zygote.poll() is None
    return ours and Path(os.environ.get("PYSPARK_PYTHON", "")).name == SCRIPT


def start_zygote() -> Path | None:
    """Start this process's zygote (once); the launcher Spark should run as its Python.

    The zygote lives as long as this process (it ends when its standard
    input, held here, closes). ``None`` off Linux, or without the
    ``sparkfn-spark-python`` script beside this interpreter.
    """
    global _zygote  # noqa: PLW0603 - one per driver process
    from sparkfn.runtime.spark import launch, zygote

    launcher = Path(sys.executable).with_name(launch.SCRIPT)
    if not sys.platform.startswith("linux") or not launcher.is_file():
        return None
    name = f"@sparkfn-zygote-{os.getpid()}-{secrets.token_hex(8)}"
    command = [sys.executable, "-m", zygote.__name__, name, "-" * zygote.ARGV_ROOM]
    # Listening before Spark can start a launcher: none finds it not there yet.
    with zygote.listen(name) as listener:
        env = {
            **os.environ,
            **zygote.THREADLESS_ENV,
            zygote.LISTENER_ENV: str(listener.fileno()),
        }
        _zygote = subprocess.Popen(  # noqa: S603 - this interpreter, this package's module
            command, stdin=subprocess.PIPE, env=env, pass_fds=[listener.fileno()]
        )
    os.environ[launch.ZYGOTE_ENV] = name
    return launcher


def spark_home_without_zip(cache: Path | None = None) -> Path | None:
    """The pip-installed pyspark as a ``SPARK_HOME`` without ``pyspark.zip`` (see above).

    Made once per pyspark installation under ``cache`` (the system's temp
    directory by default) and reused; ``None`` when pyspark has no zip to
    leave out (a Spark distribution, or a pyspark without it).
    """
    import pyspark

    installed = Path(pyspark.__file__).resolve().parent
    if not (installed / "python" / "lib" / "pyspark.zip").is_file():
        return None
    key = hashlib.sha256(f"{installed}:{pyspark.__version__}".encode()).hexdigest()[:16]
    root = cache or Path(tempfile.gettempdir())
    home = root / f"sparkfn-spark-home-{os.getuid()}-{key}"
    if (home / "jars").is_dir():  # made before, and the installation is still there
        return home
    shutil.rmtree(home, ignore_errors=True)  # left over from a removed installation
    building = Path(tempfile.mkdtemp(prefix=f"{home.name}.", dir=root))
    try:
        _link_tree(installed, building)
        building.rename(home)  # atomic; another process may have won the race
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
        if not (home / "jars").is_dir():
            return None  # not worth failing a run for: Spark works with the zip
    return home


def _link_tree(spark_home: Path, into: Path) -> None:
    """Symlink ``spark_home``'s entries into ``into``, leaving out ``python/lib/pyspark.zip``."""
    for entry in spark_home.iterdir():
        if entry.name != "python":
            (into / entry.name).symlink_to(entry)
    (into / "python" / "lib").mkdir(parents=True)
    for entry in (spark_home / "python").iterdir():
        if entry.name != "lib":
            (into / "python" / entry.name).symlink_to(entry)
    for entry in (spark_home / "python" / "lib").iterdir():
        if entry.name != "pyspark.zip":
            (into / "python" / "lib" / entry.name).symlink_to(entry)


def spark_session(
    master: str = "local[*]",
    app_name: str = "sparkfn",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession, with the sparkfn data source registered.

    A session created here gets :data:`DEFAULT_CONF`, which holds for every
    query in it, the user's own too: among others, local files are written
    without Hadoop's ``.crc`` side files and streaming checkpoints through
    Hadoop's FileSystem API (see ``docs/architecture.md``). A key given in
    ``conf`` wins over the default.

    Before a JVM starts, a ``spark://`` master must accept a connection
    (:class:`~sparkfn.ConfigError` in seconds otherwise), and the JVM's own
    output (its warnings, Spark's log4j lines) is kept off the terminal
    unless ``SPARKFN_VERBOSE=1`` (:mod:`sparkfn.runtime.spark.jvm`).
    """
    from pyspark import SparkContext

    fresh = SparkContext._active_spark_context is None  # noqa: SLF001 - no public way to ask
    use_project_interpreter(zygote=fresh and master.startswith("local"))
    from pyspark.sql import SparkSession

    from sparkfn.runtime.spark import daemon, jvm
    from sparkfn.runtime.spark.liveness import quiet_accumulators, quiet_py4j
    from sparkfn.topics.spark.source import SparkfnDataSource

    settings = {**DEFAULT_CONF, **_socket_conf(), **(conf or {})}
    launching = fresh and SparkContext._gateway is None  # noqa: SLF001 - as above
    settings.update(checkpoints.session_conf(settings, launching=launching))
    if fresh:
        jvm.check_master(master)
        if SparkContext._gateway is None and not jvm.verbose():  # noqa: SLF001 - as above
            gateway = jvm.launch_gateway(
                {"spark.master": master, "spark.app.name": app_name, **settings}
            )
            SparkContext._gateway, SparkContext._jvm = gateway, gateway.jvm  # noqa: SLF001
    # Registered before Spark's own exit handlers, so it runs after them: its daemons have
    # ended by then, and their notes folders go (see daemon.sweep_notes).
    if not _SWEEP_AT_EXIT:
        _SWEEP_AT_EXIT.append(atexit.register(daemon.sweep_notes))
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if fresh:
        quiet_accumulators(spark)
        quiet_py4j()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(SparkfnDataSource)
    return spark


_SWEEP_AT_EXIT: list[object] = []  # registered once per process

UNIX_SOCKETS_CONF = "spark.python.unix.domain.socket.enabled"
SOCKET_DIR_CONF = "spark.python.unix.domain.socket.dir"


def _socket_conf() -> dict[str, str]:
    """Unix sockets between Spark and its Python processes, when this process's zygote serves.

    Loopback TCP made each handshake with a Python process wait out delayed
    acknowledgements (two 50 ms stalls per query's source runner). Only
    where the zygote runs every Spark Python daemon: their workers end
    quietly when Spark retires them (:func:`sparkfn.runtime.spark.daemon.serve`),
    which pyspark's own daemon, over Unix sockets, reports with a traceback.
    """
    if not zygote_serves():
        return {}
    sockets = socket_dir()
    if sockets is None:  # Spark's default, the temp directory, would not do better
        return {}
    return {UNIX_SOCKETS_CONF: "true", SOCKET_DIR_CONF: str(sockets)}


STALE_SOCKET_SECONDS = 60  # younger sockets are left alone: one may be bound right now
# A socket's path fits in 107 bytes (sockaddr_un); Spark and pyspark name theirs
# "/.<uuid4>.sock" inside the directory: 43 bytes.
LONGEST_SOCKET_DIR = 107 - 43


def socket_dir(root: Path | None = None) -> Path | None:
    """The directory of this user's Unix sockets of Spark's Python processes, cleared of stale ones.

    Spark and pyspark make one socket file per daemon and per process that
    connects back, in the temp directory unless told otherwise, and a process
    that is killed leaves its file behind (a test suite left a hundred in
    twenty minutes). sparkfn gives a local session ``<temp>/sparkfn-sockets-<uid>``
    (mode 0700) and removes from it, on Linux, the sockets older than a
    minute that no process has bound (``/proc/net/unix``).

    A socket's path is at most 107 bytes, so a temp directory too deep for
    one (``TMPDIR`` set to a test's scratch directory, say) gives way to
    ``/tmp``. ``None`` (Spark then talks TCP) if no candidate is short enough,
    can be made, or is this user's alone.
    """
    roots = [root] if root is not None else [Path(tempfile.gettempdir()), Path("/tmp")]  # noqa: S108
    for candidate in roots:
        path = candidate / f"sparkfn-sockets-{os.getuid()}"
        if len(os.fsencode(path)) > LONGEST_SOCKET_DIR:
            continue
        try:
            path.mkdir(mode=0o700, exist_ok=True)
            if path.is_symlink() or path.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        _remove_stale_sockets(path)
        return path
    return None


def _remove_stale_sockets(directory: Path) -> None:
    try:
        table = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return  # not Linux: nothing tells a stale socket from a live one
    bound = {fields[7] for fields in (row.split() for row in table) if len(fields) > 7}
    too_young = time.time() - STALE_SOCKET_SECONDS
    for entry in directory.glob(".*.sock"):
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to remove
            if str(entry) not in bound and entry.lstat().st_mtime < too_young:
                entry.unlink()


WARM_UP_GROUP = "sparkfn-warm-up"  # the Spark job group of :func:`warm_up`'s job


def warm_up(spark: SparkSession) -> None:
    """Run one small Python task per task slot of ``spark``, and wait for them.

    A session's first Python task pays for the JVM's first run of the task
    path and for starting Spark's Python daemon: about a second on two
    cores, which a worker whose functions all started idle would add to the
    first message any of them gets (a parked function's wake-up measured
    2.3 s at the 99th percentile instead of under 1 s). The worker runs this
    in the background right after its session starts. The tasks go through
    the same daemon as a function's (``spark.python.daemon.module``), in
    the job group :data:`WARM_UP_GROUP` (the calling thread's group is
    restored afterwards).
    """
    context = spark.sparkContext
    slots = max(1, context.defaultParallelism)
    group = ("spark.jobGroup.id", "spark.job.description")
    before = {key: context.getLocalProperty(key) for key in group}
    context.setJobGroup(WARM_UP_GROUP, "sparkfn: the session's first Python tasks")
    try:
        spark.range(0, slots, numPartitions=slots).mapInArrow(_unchanged, "id long").collect()
    finally:  # the thread's later jobs are not the warm-up's
        for key, value in before.items():
            context.setLocalProperty(key, value)  # type: ignore[arg-type]  # None unsets


def _unchanged(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The warm-up's task: its rows, as they came."""
    yield from batches
