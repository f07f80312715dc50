"""``sparkfn functions logs``: what a worker's function logged through ``context.get_logger()``.

::

    sparkfn functions logs wordcount                   # every line so far, instances by id
    sparkfn functions logs wordcount --instance 1      # one instance's
    sparkfn functions logs wordcount --follow          # and each new line, until Ctrl+C
    sparkfn functions logs --fqfn acme/ops/enrich --tail 20

The lines are the worker's per-instance log files
(:mod:`sparkfn.runtime.function.logs`), read through its REST API
(``GET /admin/v3/functions/{tenant}/{namespace}/{name}/logs``).
"""

from __future__ import annotations

import inspect
import sys
from typing import Annotated, Any

import typer

from sparkfn.cli.admin_client import TARGET, TOKEN, URL, Call, OutputFormat, option, switch
from sparkfn.cli.flags import takes

INSTANCE = option(
    "--instance", "One instance's lines (0 to parallelism - 1).", "N", int | None, min=0
)
FOLLOW = switch("--follow", "-f", "Keep printing new lines as they are logged, until Ctrl+C.")
TAIL = option(
    "--tail", "Only the last N lines (then new ones, with --follow).", "N", int | None, min=0
)
FunctionName = Annotated[
    str | None,
    typer.Argument(
        metavar="NAME", help="The function's name (or give --name/--fqfn).", show_default=False
    ),
]


def logs(
    ctx: typer.Context,
    fields: dict[str, Any],
    *,
    instance: int | None,
    follow: bool,
    tail: int | None,
    **given: Any,
) -> None:
    """Print the lines a function logged (context.get_logger()): with --follow, new ones too."""
    call = Call.of({**given, "output_format": OutputFormat.TABLE})
    params: dict[str, Any] = {"follow": str(follow).lower()}
    if instance is not None:
        params["instance"] = instance
    if tail is not None:
        params["tail"] = tail
    # Following waits for lines as long as it takes: no read timeout then.
    with call.client(timeout=None if follow else 60.0) as client:
        try:
            client.save(f"{call.path}/logs", _Stdout(), params=params)  # type: ignore[arg-type]
        except KeyboardInterrupt:
            return  # Ctrl+C is how --follow ends


class _Stdout:
    """stdout for :meth:`AdminClient.save`: each chunk written and shown at once."""

    def write(self, data: bytes) -> int:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return len(data)


def add_commands(app: typer.Typer) -> None:
    """Add ``logs`` to the ``functions`` group ``app``: ``logs [NAME]`` or ``--name``/``--fqfn``."""
    command = takes("function", (*TARGET, INSTANCE, FOLLOW, TAIL, URL, TOKEN))(logs)
    signature = inspect.signature(command)
    ctx, *flags = signature.parameters.values()

    def with_name(ctx: typer.Context, function: FunctionName = None, **given: Any) -> None:
        if function is not None:
            if given.get("name") not in (None, function):
                msg = f"NAME {function!r} and --name {given['name']!r} disagree; give one"
                raise typer.BadParameter(msg, param_hint="NAME")
            given["name"] = function
        command(ctx, **given)

    name = inspect.Parameter(
        "function", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=FunctionName
    )
    with_name.__signature__ = signature.replace(parameters=[ctx, name, *flags])  # type: ignore[attr-defined]
    with_name.__doc__ = logs.__doc__
    app.command("logs")(with_name)
