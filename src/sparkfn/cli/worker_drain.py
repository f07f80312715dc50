"""``sparkfn worker drain``: hand a cluster worker's runs to the others, and wait.

::

    sparkfn worker drain                          # the worker at --url
    sparkfn worker drain --worker-id b --url http://a:6750   # any worker drains b

The worker is given no more room (capacity 0): the leader's next round
moves its runs to the other workers, each of which resumes from the run's
subscription, so nothing is lost or repeated under ``effectively_once``.
The command waits until nothing is assigned to it (``--timeout``), then says
so; the drained worker takes no work until it is restarted.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from sparkfn.api.errors import WorkerError
from sparkfn.cli.admin_client import DEFAULT_URL, TOKEN_ENV, URL_ENV, AdminClient

DRAIN = "/admin/v2/worker/drain"


def drain_worker(
    url: Annotated[str, typer.Option("--url", envvar=URL_ENV, help="Any worker's REST API.")] = (
        DEFAULT_URL
    ),
    token: Annotated[
        str | None,
        typer.Option("--token", envvar=TOKEN_ENV, help="A bearer token.", show_default=False),
    ] = None,
    worker_id: Annotated[
        str | None,
        typer.Option(
            "--worker-id", help="The worker to drain (the one at --url).", show_default=False
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for the runs to move.")
    ] = 120.0,
) -> None:
    """Move a worker's functions, sources and sinks to the other workers of its cluster."""
    params = {"workerId": worker_id} if worker_id else {}
    with AdminClient(url, token or None) as client:
        client.request("PUT", DRAIN, params=params)
        deadline = time.monotonic() + timeout
        while (status := client.json("GET", DRAIN, params=params)["status"]) != "SUCCESS":
            if time.monotonic() > deadline:
                msg = f"the drain is {status} after {timeout:g} s: runs are still assigned to it"
                raise WorkerError(msg)
            time.sleep(0.5)
    typer.echo(f"drained worker {worker_id or url}: its runs moved to the other workers")
