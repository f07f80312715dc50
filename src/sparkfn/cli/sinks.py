"""``sparkfn sinks``: run a sink here (``localrun``), or on a worker.

The worker commands (``create``, ``update``, ``status``, ...) are in
:mod:`sparkfn.cli.admin_connectors`.

::

    sparkfn sinks localrun --sink-type file --inputs orders \\
        --configs '{"path": "/data/orders-{instance}.jsonl"}' --parallelism 2
    sparkfn sinks localrun --py archive.py --inputs raw --subscription-position earliest \\
        --until-drained --json-status
    sparkfn sinks localrun --sink-config-file archive.yaml --sigterm suspend

``localrun`` runs the sink's Spark query in this process, on ``local[*]`` or
``--spark-master``: the sink runs as a function whose only object is the
sink (:mod:`sparkfn.connectors.sink_runtime`). The flags are the fields of
the sink config (Pulsar's names, kebab-case; ``--configs`` is also
``--sink-config``); with ``--sink-config-file`` they override the file. The
config, the input topics and the sink's code are checked before Spark starts.

Stopping: SIGTERM stops the way ``--sigterm`` says (default ``drain``); the
first Ctrl+C drains, the next stop signal cancels. With ``--until-drained``
the command ends when the input present at start is written. It exits 0 when the sink stopped cleanly, and 1 with one
``error [connector_failed]`` line naming the sink and the exception when it
died (an exception from the sink, or ``context.fatal``).

While it runs, the same table of per-instance counts as ``functions
localrun`` refreshes on stderr (``PROCESSED`` counts records written);
stdout only carries ``--json-status``.
"""

from __future__ import annotations

from typing import Any

import typer

from sparkfn.cli.admin_connectors import add_connector_commands
from sparkfn.cli.flags import takes
from sparkfn.cli.localrun import SINK_LOCALRUN, localrun_query

sinks_app = typer.Typer(name="sinks", help="Run sinks here, or on a worker.", no_args_is_help=True)
add_connector_commands(sinks_app, "sink")


@sinks_app.command("localrun")
@takes("sink", SINK_LOCALRUN)
def localrun(ctx: typer.Context, fields: dict[str, Any], **run: Any) -> None:
    """Run a sink in this process until it is stopped (or, with --until-drained, until done)."""
    localrun_query(ctx, "sink", fields, **run)
