"""Starting Spark's JVM: a master that answers first, and the JVM's own chatter kept off the terminal.

:func:`~sparkfn.runtime.spark.session.spark_session` calls both before it starts a
JVM:

* :func:`check_master` connects to a ``spark://`` master's host and port
  first, so a master that is not there is one error in a second or so, not
  a minute of Spark's retries and a hundred lines of Java stack traces.
* :func:`launch_gateway` starts the JVM as pyspark would, with its standard
  error read by a thread of this process instead of written to the
  terminal: the JVM's warnings (``Using incubator modules``), Spark's log4j
  banner and records (``WARN NativeCodeLoader``, ``Setting default log
  level``) and the output of Spark's Python processes. Its last lines are
  kept, to explain a JVM that dies before it answers. With
  ``SPARKFN_VERBOSE=1`` (``localrun --verbose``) the JVM writes to the
  terminal as pyspark lets it.

>>> check_master("spark://127.0.0.1:1")
Traceback (most recent call last):
sparkfn.api.errors.ConfigError: no Spark master answers at spark://127.0.0.1:1 (127.0.0.1:1: Connection refused)
"""

from __future__ import annotations

import collections
import os
import socket
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparkfn.api.errors import ConfigError

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway

VERBOSE_ENV = "SPARKFN_VERBOSE"
DEFAULT_MASTER_PORT = 7077  # a standalone master's port when spark:// names none
PROBE_SECONDS = 5.0  # how long one master address may take to accept a connection
TAIL_LINES = 20  # of the JVM's standard error, kept to explain its early death
DEATH_WORDS_SECONDS = 2.0  # how long a JVM that died may take to finish writing


def verbose() -> bool:
    """Whether the JVM's own output goes to the terminal (``SPARKFN_VERBOSE`` set, not 0)."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def check_master(master: str) -> None:
    """Raise :class:`ConfigError` unless one address of a ``spark://`` master accepts a connection.

    A standalone master may list several (``spark://a:7077,b:7077``, with
    ZooKeeper recovery); one answering is enough. Other masters (``local``,
    ``yarn``, ``k8s://``) are left to Spark.
    """
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            host, port = address.strip(), str(DEFAULT_MASTER_PORT)
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS):
                return
        except OSError as exc:
            problems.append(f"{host}:{port}: {exc.strerror or exc or type(exc).__name__}")
    msg = f"no Spark master answers at {master} ({'; '.join(problems)})"
    raise ConfigError(msg)


def launch_gateway(conf: Mapping[str, str]) -> JavaGateway:
    """Start the JVM with ``conf`` as pyspark's ``launch_gateway`` does, its stderr read here.

    The caller makes the gateway the ``SparkContext``'s before creating one.
    """
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway as pyspark_launch

    spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    read_end, write_end = os.pipe()
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    reader = threading.Thread(
        target=_drain, args=(read_end, tail), name="sparkfn-jvm-stderr", daemon=True
    )
    reader.start()
    try:
        return pyspark_launch(spark_conf, popen_kwargs={"stderr": write_end})  # type: ignore[no-untyped-call]
    except Exception as exc:
        os.close(write_end)
        write_end = -1
        reader.join(DEATH_WORDS_SECONDS)  # the dead JVM's last words, up to its EOF
        said = [line.strip() for line in tail if line.strip()]
        if not said:
            raise
        msg = f"{str(exc).strip()}; the JVM said: {said[-1]}"
        raise RuntimeError(msg) from exc
    finally:
        if write_end >= 0:
            os.close(write_end)  # the JVM holds its own copy; EOF comes when it exits


def _drain(fd: int, tail: collections.deque[str]) -> None:
    """Read the JVM's stderr until it closes, keeping its last lines in ``tail``."""
    with open(fd, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            tail.append(line)
