"""The ``sparkfn`` command.

::

    sparkfn topics create orders --partitions 4 --schema-type json --retention 7d
    sparkfn topics produce orders -m '{"id": 1}' --key alice
    sparkfn topics consume orders --subscription audit --json
    sparkfn sources localrun --source-type generator --output orders --source-config '{"count": 10}'
    sparkfn sinks localrun --sink-type file --inputs orders --configs '{"path": "/tmp/orders.jsonl"}'

Global options (``--data-dir``, ``--store-url``) come before the command and
default to ``SPARKFN_DATA_DIR`` / ``SPARKFN_STORE_URL``. Every error sparkfn
raises on purpose is printed as one line, ``error [reason]: message``, on
stderr, and the command exits with 1 (2 for a usage error); a traceback means
a bug. A full disk or store is ``error [storage_full]: ...``, a store that
cannot take writes ``error [store_unavailable]: ...``, even when the error
reached the command unconverted (:mod:`sparkfn.store.failures`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from sparkfn.api.errors import SparkfnError
from sparkfn.cli.cluster import cluster_app
from sparkfn.cli.context import StoreOptions, report_error
from sparkfn.cli.functions import functions_app
from sparkfn.cli.packages import packages_app
from sparkfn.cli.sinks import sinks_app
from sparkfn.cli.sources import sources_app
from sparkfn.cli.tenants import namespaces_app, tenants_app
from sparkfn.cli.tokens import tokens_app
from sparkfn.cli.topics import topics_app
from sparkfn.cli.worker import worker_app
from sparkfn.cli.worker_drain import drain_worker
from sparkfn.config.settings import DATA_DIR_ENV, STORE_URL_ENV
from sparkfn.store.failures import storage_failure

app = typer.Typer(
    name="sparkfn",
    help="Pulsar-style functions on Apache Spark: topics, functions and workers.",
    no_args_is_help=True,
    # Locals may hold a store URL with its password; never print them.
    pretty_exceptions_show_locals=False,
)
app.add_typer(topics_app, name="topics")
app.add_typer(functions_app, name="functions")
app.add_typer(packages_app, name="packages")
app.add_typer(tenants_app, name="tenants")
app.add_typer(namespaces_app, name="namespaces")
app.add_typer(sources_app, name="sources")
app.add_typer(sinks_app, name="sinks")
worker_app.command("drain")(drain_worker)
app.add_typer(worker_app, name="worker")
app.add_typer(tokens_app, name="tokens")
app.add_typer(cluster_app, name="cluster")


@app.callback()
def root(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            envvar=DATA_DIR_ENV,
            show_envvar=True,
            help="Directory for segment files and the default SQLite store (default ~/.sparkfn).",
        ),
    ] = None,
    store_url: Annotated[
        str | None,
        typer.Option(
            "--store-url",
            envvar=STORE_URL_ENV,
            show_envvar=True,
            help="Metadata store: sqlite:///PATH or postgresql://... "
            "(default: a SQLite file in the data directory).",
        ),
    ] = None,
) -> None:
    """Pulsar-style functions on Apache Spark: topics, functions and workers."""
    ctx.obj = StoreOptions(data_dir=data_dir, store_url=store_url or None)


def _validation_summary(exc: Exception) -> str | None:
    """One line for a pydantic ValidationError, or ``None`` for anything else.

    pydantic is looked up, not imported, so commands that never load it do
    not pay for the import.
    """
    pydantic: Any = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(exc, pydantic.ValidationError):
        return None
    parts = [
        f"{'.'.join(str(p) for p in error['loc']) or 'value'}: {error['msg']}"
        for error in exc.errors()
    ]
    return f"{exc.title}: " + "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``sparkfn`` command line (the console-script entry point)."""
    try:
        result = app(args=argv, prog_name="sparkfn", standalone_mode=False)
    except SparkfnError as exc:
        report_error(exc.reason, str(exc))
        sys.exit(1)
    except typer.Abort:
        report_error("aborted", "aborted by the user")
        sys.exit(1)
    except typer.TyperException as exc:  # usage errors: bad options, missing arguments
        if type(exc).__name__ == "NoArgsIsHelpError":
            # Rich help was printed already; plain help is the message itself.
            if help_text := exc.format_message().strip():
                sys.stderr.write(help_text + "\n")
        else:
            # Typer validates through pydantic, whose "Value error, " prefix is noise here.
            report_error("usage_error", exc.format_message().replace("Value error, ", ""))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        # Ctrl+C before a command took over its own (``--watch`` and ``--follow`` end
        # with 0 on it): still starting, or a command that has nothing to wind down.
        # A user's interrupt is not a defect: no traceback, the shell's 128 + SIGINT.
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (``sparkfn topics consume x --json | head``).
        # Point stdout at devnull so the interpreter's final flush stays quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    except Exception as exc:
        failure = storage_failure(exc, "the store or the data directory")
        if failure is not None:
            report_error(failure.reason, str(failure))
            sys.exit(1)
        summary = _validation_summary(exc)
        if summary is None:
            raise
        report_error("invalid_config", summary)
        sys.exit(1)
    # Without standalone mode Typer returns the code of a ``typer.Exit``.
    sys.exit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
