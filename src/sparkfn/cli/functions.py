"""``sparkfn functions``: run a function.

::

    sparkfn functions localrun --py wordcount.py --classname wordcount.WordCount \\
        --inputs sentences --output counts
    sparkfn functions localrun --function-config-file wc.yaml --parallelism 4 --metrics-port 9094
    sparkfn functions localrun --py exclamation.py --inputs in --output out \\
        --subscription-position earliest --until-drained --json-status

``localrun`` runs the function's Spark query in this process, on ``local[*]``
or ``--spark-master``. The flags are the fields of the function config
(Pulsar's names, kebab-case); with ``--function-config-file`` they override
the file. Everything that can be checked before Spark starts is: the config,
the topics and the code, so a mistake costs no JVM start.

While it runs, a table of per-instance counts refreshes on stderr (a plain
progress line every few seconds when stderr is not a terminal:
:mod:`sparkfn.cli.progress`); stdout only carries ``--json-status``. Ctrl+C or SIGTERM stops the query cleanly and
exits 0; a second one aborts. With ``--until-drained`` the command ends when
the input present at start is processed: 0 if that went well, 1 with an
``error [function_failed]`` line if the function failed.

pyspark is imported inside the command only, so the rest of the CLI stays fast.
"""

from __future__ import annotations

from typing import Any

import typer

from sparkfn.cli.admin import add_admin_commands
from sparkfn.cli.flags import takes
from sparkfn.cli.localrun import FUNCTION_LOCALRUN, localrun_query

functions_app = typer.Typer(
    name="functions",
    help="Run functions here (localrun) or on a worker (create, status, ...).",
    no_args_is_help=True,
)


@functions_app.command("localrun")
@takes("function", FUNCTION_LOCALRUN)
def localrun(ctx: typer.Context, fields: dict[str, Any], **run: Any) -> None:
    """Run a function in this process until Ctrl+C (or, with --until-drained, until done)."""
    localrun_query(ctx, "function", fields, **run)


add_admin_commands(functions_app)  # create, status, ...: the commands that talk to a worker
