"""``sparkfn worker start``: the worker process, serving the REST API.

::

    sparkfn --data-dir /var/lib/sparkfn worker start --port 6750
    SPARKFN_WORKER_PORT=7000 sparkfn worker start --config-file worker.yml

The worker opens its store, serves the API at once, and starts again, in the
background, every function that was running when it last stopped. SIGTERM
or Ctrl+C stops it gracefully: its functions are suspended (or drained, with
``--shutdown-mode drain``) and start again with the next worker.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

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
    config_file: Annotated[
        Path | None,
        typer.Option("--config-file", help="A YAML file of worker settings (snake or camelCase)."),
    ] = None,
) -> None:
    """Start a worker in the foreground; it runs until SIGTERM or Ctrl+C."""
    import uvicorn

    from sparkfn.worker.app import create_app
    from sparkfn.worker.service import Worker
    from sparkfn.worker.settings import WorkerSettings

    options = ctx.find_object(StoreOptions) or StoreOptions()
    settings = WorkerSettings.resolve(
        config_file=config_file,
        host=host,
        port=port,
        spark_master=spark_master,
        shutdown_mode=shutdown_mode,
        data_dir=options.data_dir,
        store_url=options.store_url,
    )
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    worker = Worker(settings)
    worker.open()
    restoring = threading.Thread(target=worker.restore, name="sparkfn-restore", daemon=True)
    restoring.start()
    sys.stderr.write(f"sparkfn worker {settings.worker_id} serving on {settings.url}\n")
    # A function whose failure policy says SHUTDOWN_WORKER stops the whole worker
    # as SIGTERM does: the server ends gracefully and its shutdown stops the rest.
    worker.on_shutdown_request = lambda: os.kill(os.getpid(), signal.SIGTERM)
    app = create_app(worker, shutdown_worker=True)
    # SIGTERM and Ctrl+C end the server gracefully; the app's shutdown stops the functions.
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")
