"""``sparkfn cluster up|down|status``: a Spark standalone cluster on this machine.

::

    sparkfn cluster up --workers 2 --cores 2 --memory 2g    # master on spark://127.0.0.1:7077
    sparkfn worker start --spark-master spark://127.0.0.1:7077
    sparkfn cluster status --json
    sparkfn cluster down

The master and workers are the installed pyspark's own daemons
(:mod:`sparkfn.runtime.spark.standalone`), started in the background; their
record, logs and work directories are under ``<data dir>/spark-cluster``.
``down`` stops exactly what ``up`` started, by the recorded pids.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sparkfn.cli.context import StoreOptions, console, emit_json, note

if TYPE_CHECKING:
    from sparkfn.runtime.spark.standalone import Cluster

cluster_app = typer.Typer(
    help="A Spark standalone cluster on this machine (master and workers), for --spark-master.",
    no_args_is_help=True,
)

NOT_UP = 3  # `status` of a cluster that is not up, as `systemctl status` says it
CLUSTER_DIR = "spark-cluster"


def cluster_root(ctx: typer.Context) -> Path:
    """``<data dir>/spark-cluster``: the cluster's record, logs and work directories."""
    from sparkfn.config.settings import Settings

    options = ctx.find_object(StoreOptions) or StoreOptions()
    return Settings.resolve(options.data_dir).data_dir / CLUSTER_DIR


@cluster_app.command("up")
def up(
    ctx: typer.Context,
    workers: Annotated[int, typer.Option("--workers", help="Spark workers to start.")] = 1,
    cores: Annotated[int, typer.Option("--cores", help="Cores each worker offers.")] = 1,
    memory: Annotated[
        str, typer.Option("--memory", help="Memory each worker offers its executors (1g, 512m).")
    ] = "1g",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="The master's port.")
    ] = 7077,
    webui_port: Annotated[
        int, typer.Option("--webui-port", min=1, max=65535, help="The master's web UI port.")
    ] = 8080,
    app_cores: Annotated[
        int | None,
        typer.Option(
            "--app-cores",
            help="Cores each application (each sparkfn worker) gets unless it sets "
            "spark.cores.max (default: every free core, leaving later ones none).",
        ),
    ] = None,
) -> None:
    """Start a Spark master and workers in the background; returns once all have registered."""
    from sparkfn.runtime.spark.standalone import (
        EXECUTOR_DEFAULT_MB,
        memory_mb,
        refuse_if_up,
        start,
    )

    root = cluster_root(ctx)
    refuse_if_up(root)
    note(f"starting a Spark master and {workers} worker(s) (logs in {root / 'logs'}) ...")
    cluster = start(
        root, workers=workers, cores=cores, memory=memory, port=port, webui_port=webui_port,
        app_cores=app_cores,
    )  # fmt: skip
    out = console()
    out.print(f"Spark master {cluster.master_url} (web UI {cluster.webui_url})")
    out.print(f"{workers} worker(s), {cores} core(s) and {memory} each")
    out.print(f"run functions on it: sparkfn worker start --spark-master {cluster.master_url}")
    if memory_mb(memory) < EXECUTOR_DEFAULT_MB:
        note(
            f"note: an executor asks for 1g unless its driver sets spark.executor.memory; "
            f"a worker of {memory} starts one only for a driver that asks for {memory} or less "
            "(spark-defaults.conf in SPARK_CONF_DIR)"
        )


@cluster_app.command("down")
def down(ctx: typer.Context) -> None:
    """Stop the master and workers `up` started (and their executors); nothing else."""
    from sparkfn.runtime.spark.standalone import Cluster, stop

    root = cluster_root(ctx)
    recorded = Cluster.load(root)
    if recorded is None:
        note(f"no Spark cluster is up (none recorded under {root})")
        return
    stopped = stop(root)
    if stopped:
        roles = ", ".join(f"{d.role} (pid {d.pid})" for d in stopped)
        note(f"stopped the Spark cluster at {recorded.master_url}: {roles}")
    else:
        note(f"the Spark cluster at {recorded.master_url} had stopped already; record removed")


@cluster_app.command("status")
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """The master URL, each worker's cores, memory and liveness, and the applications."""
    from sparkfn.runtime.spark.standalone import Cluster

    root = cluster_root(ctx)
    cluster = Cluster.load(root)
    view = _view(cluster, root)
    if as_json:
        emit_json(view)
    elif cluster is None:
        note(f"no Spark cluster is up (none recorded under {root})")
    else:
        _print(view)
    if not view["up"]:
        raise typer.Exit(NOT_UP)


def _view(cluster: Cluster | None, root: Path) -> dict[str, Any]:
    """The cluster as ``status --json`` shows it: the record, the pids' liveness, the master's view."""
    if cluster is None:
        return {"up": False, "root": str(root), "workers": [], "applications": []}
    alive = {d.role for d in cluster.alive()}
    try:
        state: dict[str, Any] = cluster.state() if "master" in alive else {}
        problem = None if state else "the master is not running"
    except (OSError, ValueError) as exc:
        state, problem = {}, f"the master's web UI did not answer: {exc}"
    registered = {int(w.get("port", 0)): w for w in state.get("workers", [])}
    workers = []
    for daemon in cluster.daemons:
        if daemon.role == "master":
            continue
        seen = registered.get(daemon.port, {})
        workers.append(
            {
                "name": daemon.role,
                "pid": daemon.pid,
                "running": daemon.role in alive,
                "state": seen.get("state", "NOT REGISTERED"),
                "address": f"{cluster.host}:{daemon.port}",
                "webUiUrl": f"http://{cluster.host}:{daemon.webui_port}",
                "cores": seen.get("cores", cluster.cores),
                "coresUsed": seen.get("coresused", 0),
                "memoryMb": seen.get("memory"),
                "memoryUsedMb": seen.get("memoryused", 0),
                "log": daemon.log,
            }
        )
    master = next((d for d in cluster.daemons if d.role == "master"), None)
    return {
        "up": "master" in alive and all(w["running"] for w in workers),
        "root": str(root),
        "masterUrl": cluster.master_url,
        "webUiUrl": cluster.webui_url,
        "master": {
            "pid": master.pid if master else None,
            "running": "master" in alive,
            "status": state.get("status"),
            "log": master.log if master else None,
        },
        "problem": problem,
        "workers": workers,
        "applications": [
            {
                "id": a.get("id"),
                "name": a.get("name"),
                "cores": a.get("cores"),
                "memoryPerExecutorMb": a.get("memoryperexecutor", a.get("memoryperslave")),
                "state": a.get("state"),
            }
            for a in state.get("activeapps", [])
        ],  # fmt: skip
        "workDir": str(cluster.work_dir),
    }


def _print(view: dict[str, Any]) -> None:
    master = view["master"]
    running = "running" if master["running"] else "NOT RUNNING"
    lines = [
        f"master    {view['masterUrl']}  pid {master['pid']}  {running}",
        f"web UI    {view['webUiUrl']}",
    ]
    if view["problem"]:
        lines.append(f"problem   {view['problem']}")
    for worker in view["workers"]:
        memory = f"{worker['memoryMb']} MB" if worker["memoryMb"] is not None else "? MB"
        process = "running" if worker["running"] else "NOT RUNNING"
        lines.append(
            f"{worker['name']:<9} {worker['address']}  pid {worker['pid']} {process}  "
            f"{worker['state']}  {worker['cores']} core(s), {memory}  "
            f"(used: {worker['coresUsed']} core(s), {worker['memoryUsedMb']} MB)"
        )
    for app in view["applications"]:
        lines.append(
            f"app       {app['id']}  {app['name']}  {app['cores']} core(s)  {app['state']}"
        )
    lines.append(f"logs      {Path(view['root']) / 'logs'}")
    out = console()
    for line in lines:
        out.print(line, soft_wrap=True)  # a long path stays one line
