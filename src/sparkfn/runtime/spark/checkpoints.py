"""Streaming checkpoint files without a ``chmod`` process per file: a Java class built once.

Every micro-batch of every streaming query writes two checkpoint files (its
offsets before, its commit after). Without Hadoop's native library, which
pyspark does not ship, Hadoop's local file system sets each new file's
permissions by running ``chmod`` in a child process of the driver's JVM:
two processes per batch, a few milliseconds each on the batch's own path.
``java/LocalCheckpointFileManager.java`` is Spark's FileSystem-based
checkpoint manager with its temp files opened as plain files (the process's
umask gives them the mode that ``chmod`` set).

:func:`session_conf` compiles it with the JDK's ``javac`` the first time
(a few seconds; the jar is kept in the user's cache directory,
``$XDG_CACHE_HOME/sparkfn`` or ``~/.cache/sparkfn``, else the system's temp
directory, named by the source's and pyspark's versions) and returns the
settings that put it on the driver's class path and make it the session's
checkpoint manager. Where no ``javac`` is found or the build fails, it
returns nothing and the session keeps Spark's FileSystem-based manager
(:data:`SPARK_MANAGER`): the only cost is the child processes. A user's own
``checkpointFileManagerClass`` wins.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
CLASS_PATH_KEY = "spark.driver.extraClassPath"
MANAGER_CLASS = "sparkfn.spark.LocalCheckpointFileManager"
# Spark's manager through Hadoop's FileSystem API: the session's default without the jar.
SPARK_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
SOURCE = Path(__file__).with_name("java") / "LocalCheckpointFileManager.java"
# Seconds a compile may take (about 4 s on two busy cores).
COMPILE_SECONDS = 120.0


def cache_root() -> Path:
    """The user's cache directory for sparkfn (``$XDG_CACHE_HOME/sparkfn``, else
    ``~/.cache/sparkfn``); the system's temp directory where that cannot be made."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    root = Path(base) / "sparkfn"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Path(tempfile.gettempdir())
    return root


def jar_path() -> Path:
    """Where the class's jar is kept: named by the source and pyspark's version."""
    import pyspark

    text = SOURCE.read_bytes() + pyspark.__version__.encode()
    key = hashlib.sha256(text).hexdigest()[:16]
    return cache_root() / f"sparkfn-checkpoints-{os.getuid()}-{key}.jar"


def _javac() -> str | None:
    """The JDK's compiler: ``$JAVA_HOME/bin/javac``, else the one beside ``java``, else on PATH."""
    home = os.environ.get("JAVA_HOME")
    candidates = [Path(home) / "bin" / "javac"] if home else []
    java = shutil.which("java")
    if java:
        candidates.append(Path(java).resolve().parent / "javac")
    found = next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)
    return found or shutil.which("javac")


@functools.cache
def built_jar() -> Path | None:
    """The class's jar, compiled if missing (once per process asks the disk); None if it
    cannot be built here (no ``javac``, or it failed: said once in the log)."""
    jar = jar_path()
    if jar.is_file():
        return jar
    javac = _javac()
    if javac is None:
        log.info("no javac found: checkpoint files keep Hadoop's chmod per file")
        return None
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    with open(f"{jar}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it
        if jar.is_file():
            return jar
        with tempfile.TemporaryDirectory(prefix="sparkfn-javac-") as out:
            command = [javac, "--release", "17", "-nowarn", "-cp", f"{jars}/*", "-d", out]
            try:
                done = subprocess.run(  # noqa: S603 - the JDK's compiler on our own source
                    [*command, str(SOURCE)],
                    capture_output=True, text=True, timeout=COMPILE_SECONDS, check=False,
                )  # fmt: skip
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.warning("could not compile %s (%s): checkpoints keep chmod", SOURCE.name, exc)
                return None
            if done.returncode != 0:
                said = done.stderr.strip()[-500:]
                log.warning("could not compile %s: %s; checkpoints keep chmod", SOURCE.name, said)
                return None
            building = jar.with_suffix(f".{os.getpid()}.building")
            with zipfile.ZipFile(building, "w") as archive:
                for path in sorted(Path(out).rglob("*.class")):
                    archive.write(path, path.relative_to(out).as_posix())
            building.rename(jar)  # atomic: a JVM never sees half a jar
    return jar


def session_conf(settings: Mapping[str, str], *, launching: bool) -> dict[str, str]:
    """The settings to add to a session's ``settings`` so its checkpoints use the class.

    ``launching``: the session's JVM is started with these settings (the jar can go on its
    class path); otherwise the running JVM must have the jar already. Nothing when the
    user chose a manager of their own or the jar cannot be had.
    """
    if settings.get(MANAGER_KEY, SPARK_MANAGER) != SPARK_MANAGER:
        return {}  # the user's own manager
    jar = built_jar() if launching else _running_jar()
    if jar is None:
        return {}
    path = settings.get(CLASS_PATH_KEY, "")
    if str(jar) not in path.split(os.pathsep):
        path = os.pathsep.join(p for p in (path, str(jar)) if p)
    return {MANAGER_KEY: MANAGER_CLASS, CLASS_PATH_KEY: path}


def _running_jar() -> Path | None:
    """The jar, if the running SparkContext's driver has it on its class path."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context  # noqa: SLF001 - no public way to ask
    if context is None:
        return None
    with contextlib.suppress(Exception):  # a context being stopped
        path = context.getConf().get(CLASS_PATH_KEY) or ""
        jar = jar_path()
        if str(jar) in path.split(os.pathsep) and jar.is_file():
            return jar
    return None
