"""A Spark standalone cluster on this machine, from the installed pyspark: a master and N workers.

``sparkfn cluster up|down|status`` and the tests use it; so may a
single-host deployment. Nothing is downloaded: the daemons are pyspark's own
``bin/spark-class`` (through the unzipped ``SPARK_HOME`` that
:func:`~sparkfn.runtime.spark.session.use_project_interpreter` arranges), run
in the background, each the leader of a session of its own, with this
interpreter as Spark's Python. What :func:`start` started is recorded in
``<root>/cluster.json`` (pids, their start times, ports, URLs, log files), so
:func:`stop`, from any later process, stops exactly those processes and the
executors and Python workers they started, and nothing else:

* a daemon is signalled only while its pid still names the process that was
  started (its start time in ``/proc/<pid>/stat`` is the one recorded);
* what is left of its session afterwards is killed only where the process
  carries the cluster's own token in its environment
  (:data:`TOKEN_ENV`, inherited by every executor and Python worker).

>>> cluster = start(Path("/tmp/c"), workers=2, cores=1, memory="1g")
>>> cluster.master_url
'spark://127.0.0.1:7077'
>>> stop(Path("/tmp/c"))
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sparkfn.api.errors import ClusterAlreadyUpError, ConfigError, SparkClusterError
from sparkfn.runtime.spark.processes import (
    check_free,
    check_java,
    free_port,
    session_members,
    start_time,
    tail,
)

STATE_FILE = "cluster.json"
TOKEN_ENV = "SPARKFN_SPARK_CLUSTER"  # in every process of a cluster: whose it is
HOST = "127.0.0.1"
DEFAULT_PORT = 7077  # Spark's own defaults
DEFAULT_WEBUI_PORT = 8080
DAEMON_MEMORY = "512m"  # the master's and each worker's own heap (not their executors')
READY_SECONDS = 120.0  # for the master to answer and every worker to register
STOP_SECONDS = 20.0  # for a daemon to end after SIGTERM, before what is left is killed
EXECUTOR_DEFAULT_MB = 1024  # spark.executor.memory's default: what an executor asks a worker
_MEMORY = re.compile(r"^(\d+)([mg])$", re.IGNORECASE)


@dataclass(frozen=True)
class Daemon:
    """One started daemon: ``master`` or ``worker-N``."""

    role: str
    pid: int
    started: int  # the process's start time, clock ticks after boot (/proc/<pid>/stat)
    port: int
    webui_port: int
    log: str


@dataclass
class Cluster:
    """What :func:`start` started, as recorded in ``<root>/cluster.json``."""

    root: str
    token: str
    host: str
    port: int
    webui_port: int
    workers: int
    cores: int
    memory: str
    python: str
    # Cores an application gets unless it sets spark.cores.max; None: every free core.
    app_cores: int | None = None
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        """The URL drivers give as their master (``--spark-master``)."""
        return f"spark://{self.host}:{self.port}"

    @property
    def webui_url(self) -> str:
        """The master's web UI (its JSON state is at ``/json/``)."""
        return f"http://{self.host}:{self.webui_port}"

    @property
    def work_dir(self) -> Path:
        """Where the workers keep each application's directory (executor logs)."""
        return Path(self.root) / "work"

    def save(self) -> None:
        """Write the record (atomically: a reader never sees half of it)."""
        path = Path(self.root) / STATE_FILE
        temp = path.with_suffix(".tmp")
        temp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        temp.replace(path)

    @classmethod
    def load(cls, root: Path) -> Cluster | None:
        """The cluster recorded under ``root``, or None if none is."""
        try:
            raw = json.loads((root / STATE_FILE).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            msg = f"the Spark cluster record {root / STATE_FILE} cannot be read: {exc}"
            raise ConfigError(msg) from None
        daemons = [Daemon(**d) for d in raw.pop("daemons", [])]
        return cls(**raw, daemons=daemons)

    def alive(self) -> list[Daemon]:
        """The recorded daemons that still run (the same processes, not reused pids)."""
        return [d for d in self.daemons if start_time(d.pid) == d.started]

    def processes(self) -> list[int]:
        """Every process of this cluster still running: its daemons, executors, Python workers."""
        return _leftovers(self)

    def env(self) -> dict[str, str]:
        """The environment of the cluster's daemons, which a driver on this host may share.

        Spark's Python is this interpreter, from the unzipped ``SPARK_HOME``;
        the daemons' own JVM options are ``SPARK_SUBMIT_OPTS``'s.
        """
        from sparkfn.runtime.spark.launch import ZYGOTE_ENV
        from sparkfn.runtime.spark.session import use_project_interpreter

        saved = os.environ.copy()
        try:  # this process's environment as it was: its own session decides its Python
            use_project_interpreter()
            inherited = os.environ.copy()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        # This interpreter itself: a launcher of this process's zygote serves its Spark only.
        inherited.pop(ZYGOTE_ENV, None)
        inherited["PYSPARK_PYTHON"] = inherited["PYSPARK_DRIVER_PYTHON"] = self.python
        return {
            **inherited,
            TOKEN_ENV: self.token,
            "SPARK_LOCAL_IP": self.host,
            "SPARK_MASTER_HOST": self.host,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": inherited.get("SPARK_SUBMIT_OPTS", ""),
            "SPARK_LOG_DIR": str(Path(self.root) / "logs"),
            "SPARK_WORKER_DIR": str(self.work_dir),
            "SPARK_MASTER_OPTS": (
                f"-Dspark.deploy.defaultCores={self.app_cores}" if self.app_cores else ""
            ),
        }

    def state(self, timeout: float = 5.0) -> dict[str, Any]:
        """The master's own view (its web UI's JSON: workers, applications)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=timeout) as answer:  # noqa: S310 - our own http URL
            state: dict[str, Any] = json.load(answer)
        return state


def start(
    root: Path,
    *,
    workers: int = 1,
    cores: int = 1,
    memory: str = "1g",
    port: int = DEFAULT_PORT,
    webui_port: int = DEFAULT_WEBUI_PORT,
    app_cores: int | None = None,
    python: str | None = None,
    ready_seconds: float = READY_SECONDS,
) -> Cluster:
    """Start a master and ``workers`` workers of ``cores`` cores and ``memory`` each; wait for them.

    Each application (a driver: a ``sparkfn worker``) takes every free core
    unless it sets ``spark.cores.max``, or ``app_cores`` caps it (the
    master's ``spark.deploy.defaultCores``): with several workers sharing
    one cluster, the first would otherwise leave the others none.

    Returns once every worker has registered with the master. Refused, with
    nothing started, when a cluster recorded under ``root`` still runs, Java
    is missing, a port is taken or a setting is out of range; a daemon that
    fails to come up stops the rest and raises :class:`SparkClusterError`
    with its log's last lines.
    """
    import sys

    _check_settings(workers, cores, memory)
    if app_cores is not None and app_cores < 1:
        msg = f"--app-cores must be at least 1, not {app_cores}"
        raise ConfigError(msg)
    root.mkdir(parents=True, exist_ok=True)
    refuse_if_up(root)
    stop(root, timeout=1.0)  # a record of a cluster that died: whatever it left, and the record
    check_java()
    for number, what in ((port, "--port"), (webui_port, "--webui-port")):
        check_free(HOST, number, what)
    cluster = Cluster(
        root=str(root),
        token=secrets.token_hex(8),
        host=HOST,
        port=port,
        webui_port=webui_port,
        workers=workers,
        cores=cores,
        memory=memory.lower(),
        python=python or sys.executable,
        app_cores=app_cores,
    )
    for folder in (root / "logs", cluster.work_dir):
        folder.mkdir(exist_ok=True)
    env = cluster.env()
    spark_class = _spark_home(env) / "bin" / "spark-class"
    try:
        cluster.daemons.append(
            _launch(
                cluster, env, "master", port, webui_port,
                [str(spark_class), "org.apache.spark.deploy.master.Master", "-h", HOST,
                 "-p", str(port), "--webui-port", str(webui_port)],
            )
        )  # fmt: skip
        cluster.save()  # from here on, `down` finds what was started even if this dies
        for number in range(1, workers + 1):
            own, ui = free_port(HOST), free_port(HOST)
            cluster.daemons.append(
                _launch(
                    cluster, env, f"worker-{number}", own, ui,
                    [str(spark_class), "org.apache.spark.deploy.worker.Worker",
                     cluster.master_url, "-h", HOST, "-p", str(own), "--webui-port", str(ui),
                     "--cores", str(cores), "--memory", memory,
                     "--work-dir", str(cluster.work_dir / f"worker-{number}")],
                )
            )  # fmt: skip
            cluster.save()
        _wait_ready(cluster, ready_seconds)
    except BaseException:
        stop(root)
        raise
    return cluster


def _spark_home(env: dict[str, str]) -> Path:
    """The user's ``SPARK_HOME``, the unzipped copy of pyspark, or the installed pyspark itself."""
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"])
    import pyspark

    env["SPARK_HOME"] = str(Path(pyspark.__file__).resolve().parent)
    return Path(env["SPARK_HOME"])


def refuse_if_up(root: Path) -> None:
    """Raise :class:`ClusterAlreadyUpError` if a daemon recorded under ``root`` still runs."""
    before = Cluster.load(root)
    if before is not None and (running := before.alive()):
        roles = ", ".join(f"{d.role} (pid {d.pid})" for d in running)
        msg = (
            f"a Spark cluster is already up at {before.master_url} ({roles}); "
            "`sparkfn cluster down` stops it"
        )
        raise ClusterAlreadyUpError(msg)


def _launch(
    cluster: Cluster, env: dict[str, str], role: str, port: int, webui_port: int, command: list[str]
) -> Daemon:
    log = Path(cluster.root) / "logs" / f"{role}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(  # noqa: S603 - pyspark's own spark-class
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # outlives this command; its session is the cluster's
        )
    started = start_time(proc.pid)
    if started is None:  # ended at once (a shell error): the log says why
        started = -1
    return Daemon(role, proc.pid, started, port, webui_port, str(log))


def _wait_ready(cluster: Cluster, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    seen = "the master's web UI did not answer"
    while time.monotonic() < deadline:
        dead = [d for d in cluster.daemons if d not in cluster.alive()]
        if dead:
            msg = f"the Spark {dead[0].role} exited at its start:\n{tail(Path(dead[0].log))}"
            raise SparkClusterError(msg)
        try:
            state = cluster.state()
        except (OSError, ValueError) as exc:  # not up yet, or its HTML before its JSON
            seen = f"the master's web UI: {exc}"
        else:
            alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
            if len(alive) >= cluster.workers:
                return
            seen = f"{len(alive)} of {cluster.workers} workers registered"
        time.sleep(0.5)
    logs = "\n".join(tail(Path(d.log)) for d in cluster.daemons)
    msg = f"the Spark cluster was not up within {seconds:.0f} s ({seen}):\n{logs}"
    raise SparkClusterError(msg)


def stop(root: Path, timeout: float = STOP_SECONDS) -> list[Daemon]:
    """Stop what :func:`start` recorded under ``root``; the daemons that were still running.

    Workers first (each ends its executors), then the master: SIGTERM to
    each daemon's process group, then, after ``timeout``, SIGKILL to every
    process left in its session that carries the cluster's token. Idempotent:
    with nothing recorded, or nothing running, it does nothing. The record
    goes; the logs and the work directory stay.
    """
    cluster = Cluster.load(root)
    if cluster is None:
        return []
    running = cluster.alive()
    for daemon in sorted(running, key=lambda d: d.role == "master"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(daemon.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _leftovers(cluster):
        time.sleep(0.2)
    for pid in _leftovers(cluster):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    (root / STATE_FILE).unlink(missing_ok=True)
    return running


def _check_settings(workers: int, cores: int, memory: str) -> None:
    if workers < 1:
        msg = f"--workers must be at least 1, not {workers}"
        raise ConfigError(msg)
    if cores < 1:
        msg = f"--cores must be at least 1, not {cores}"
        raise ConfigError(msg)
    if not _MEMORY.match(memory):
        msg = f"--memory must be a size in megabytes or gigabytes (512m, 2g), not {memory!r}"
        raise ConfigError(msg)


def memory_mb(memory: str) -> int:
    """``512m`` -> 512, ``2g`` -> 2048."""
    found = _MEMORY.match(memory)
    if found is None:
        msg = f"not a memory size: {memory!r}"
        raise ConfigError(msg)
    return int(found[1]) * (1024 if found[2].lower() == "g" else 1)


def _leftovers(cluster: Cluster) -> list[int]:
    return session_members({d.pid for d in cluster.daemons}, f"{TOKEN_ENV}={cluster.token}")
