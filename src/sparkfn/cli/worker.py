"""``sparkfn worker start``: the worker process, serving the REST API.

::

    sparkfn --data-dir /var/lib/sparkfn worker start --port 6750
    SPARKFN_WORKER_PORT=7000 sparkfn worker start --config-file worker.yml

The worker takes its port first (a busy port is one error line, exit 1,
before a store is opened or a JVM started), opens its store, serves the API
at once, and starts again, in the background, every function that was
running when it last stopped. SIGTERM or Ctrl+C stops it gracefully: its
functions are suspended (or drained, with ``--shutdown-mode drain``) and
start again with the next worker.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

from sparkfn.api.errors import ConfigError
from sparkfn.api.lifecycle import StopMode
from sparkfn.cli.context import StoreOptions

worker_app = typer.Typer(help="Run a worker: the REST API and the functions submitted to it.")


@worker_app.command("start")
def start(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="Address to listen on (127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (6750).")] = None,
    spark_master: Annotated[
        str | None, typer.Option("--spark-master", help="Spark master URL (local[*]).")
    ] = None,
    shutdown_mode: Annotated[
        StopMode | None,
        typer.Option(
            "--shutdown-mode",
            help="How SIGTERM stops the functions: suspend (default) or drain.",
        ),
    ] = None,
    worker_id: Annotated[
        str | None,
        typer.Option(
            "--worker-id",
            help="This worker's id in its cluster (host:port).",
            envvar="SPARKFN_WORKER_WORKER_ID",
            show_envvar=True,
        ),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option("--config-file", help="A YAML file of worker settings (snake or camelCase)."),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help=(
                "A Host the worker answers (repeat; name, name:port or *); default: "
                "localhost, 127.0.0.1, [::1] and --host, at the worker's port. "
                "Env: SPARKFN_WORKER_ALLOWED_HOSTS (comma-separated)."
            ),
        ),
    ] = None,
) -> None:
    """Start a worker in the foreground; it runs until SIGTERM or Ctrl+C."""
    import uvicorn

    from sparkfn.store.private import PRIVATE_UMASK, tighten_tree
    from sparkfn.worker.api.app import create_app
    from sparkfn.worker.service import Worker
    from sparkfn.worker.settings import WorkerSettings

    options = ctx.find_object(StoreOptions) or StoreOptions()
    given = {
        "host": host, "port": port, "spark_master": spark_master, "worker_id": worker_id,
        "shutdown_mode": shutdown_mode, "data_dir": options.data_dir,
        "store_url": options.store_url,
        "allowed_hosts": tuple(allowed_host) if allowed_host else None,
    }  # fmt: skip
    settings = WorkerSettings.resolve(config_file=config_file, **given)
    listening = listen(settings.host, settings.port)
    if settings.port == 0:  # --port 0: the cluster must know (and the id say) the port given
        given["port"] = listening.getsockname()[1]
        settings = WorkerSettings.resolve(config_file=config_file, **given)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Before anything is written or started: what the worker, Spark and its Python
    # workers create (segments, packages, logs, checkpoints) is its user's only.
    os.umask(PRIVATE_UMASK)
    # Py4J logs each connection it opens or closes at INFO, and a traceback for each
    # call that found the JVM gone: sparkfn says what matters of those itself.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    worker = Worker(settings)
    worker.open()  # the data directory 0700, a SQLite store 0600
    tighten_tree(Path(settings.data_dir) / "logs")  # log files an older worker left 0644
    port = listening.getsockname()[1]  # --port 0: the one the system gave
    sys.stderr.write(
        f"sparkfn worker {settings.worker_id} serving on http://{settings.host}:{port} "
        f"(Spark master {settings.spark_master})\n"
    )
    # A function whose failure policy says SHUTDOWN_WORKER stops the whole worker
    # as SIGTERM does: the server ends gracefully and its shutdown stops the rest.
    worker.on_shutdown_request = lambda: os.kill(os.getpid(), signal.SIGTERM)
    # A JVM that died and no new session: the worker ends, non-zero, for its service
    # manager to start it again.
    session_failures: list[str] = []

    def session_failed(message: str) -> None:
        session_failures.append(message)
        server.should_exit = True  # as SIGTERM, but uvicorn then raises no signal again

    worker.on_session_failure = session_failed
    app = create_app(worker, shutdown_worker=True)
    # Spark starts once the app is built: started before, it took the two cores of a
    # loaded machine from the app's building and delayed the first answer by seconds.
    restoring = threading.Thread(target=worker.restore, name="sparkfn-restore", daemon=True)
    restoring.start()
    # SIGTERM and Ctrl+C end the server gracefully; the app's shutdown stops the functions.
    # Requests still running REQUEST_GRACE s after SIGTERM are cancelled (one stuck
    # on a broker would hold the shutdown forever), then the functions are stopped.
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=REQUEST_GRACE)
    )
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises Ctrl+C again once it stopped
        server.run(sockets=[listening])
    if not server.started:  # the app's startup failed; uvicorn logged why
        raise typer.Exit(STARTUP_FAILED)
    if session_failures:
        sys.stderr.write(f"error: {session_failures[0]}\n")
        raise typer.Exit(SPARK_LOST)


STARTUP_FAILED = 3  # uvicorn's own exit status for a server that never started
REQUEST_GRACE = 10  # seconds requests in progress get to finish after SIGTERM
SPARK_LOST = 4  # the Spark JVM died and no new session could start


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, for the server to serve on.

    Bound before anything else starts, so that a port in use (or a host that
    is not this machine's) is one error line naming ``--port``, not uvicorn's
    ``[Errno 98]`` after a store was opened and a JVM started. Bound as
    uvicorn binds (IPv6 for a host with a colon; ``SO_REUSEADDR``, so a port a stopped worker left in
    ``TIME_WAIT`` is taken again at once).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            msg = (
                f"port {port} on {host} is in use by another process; "
                "stop it or choose another port with --port (or SPARKFN_WORKER_PORT)"
            )
        else:
            msg = f"cannot listen on {host}:{port}: {exc.strerror or exc} (--host, --port)"
        raise ConfigError(msg) from None
    sock.set_inheritable(True)
    return sock
