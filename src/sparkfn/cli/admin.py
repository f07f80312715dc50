"""``sparkfn functions get|list|delete|start|stop|restart|drain|suspend``: a worker's functions.

::

    sparkfn functions list --tenant public --namespace default
    sparkfn functions get --name wordcount --version 1
    sparkfn functions stop --fqfn public/default/wordcount --instance-id 0
    sparkfn functions delete --name wordcount --url http://worker:6750 --output json

These commands talk to a worker (``sparkfn worker start``) over its REST API,
as ``pulsar-admin functions`` does (:mod:`sparkfn.cli.admin_client`: ``--url``,
``--token``, ``--output``). ``status``, ``stats`` and the state commands are
in :mod:`sparkfn.cli.admin_status` and :mod:`sparkfn.cli.admin_state`;
:func:`add_admin_commands` puts them all in the ``functions`` group beside
``localrun``, which needs no worker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Group, RenderableType
from rich.table import Table

from sparkfn.cli.admin_client import (
    CONNECTION,
    FUNCTIONS,
    INSTANCE_ID,
    TARGET,
    Call,
    option,
    show,
)
from sparkfn.cli.flags import takes

VERSION = option("--version", "A version (default: the current one).", "N", int | None, min=1)


def get(ctx: typer.Context, fields: dict[str, Any], *, version: int | None, **given: Any) -> None:
    """Show a function's config: the current version, or --version N."""
    call = Call.of(given)
    params = {} if version is None else {"version": version}
    with call.client() as client:
        info = client.json("GET", call.path, params=params)
    show(call, info, _info_table)


def _info_table(info: dict[str, Any]) -> RenderableType:
    head = Table.grid(padding=(0, 2))
    head.add_row("function", f"{info['fqfn']}  version {info['version']}")
    head.add_row("package", str(info.get("packageDigest") or "-"))
    head.add_row("created", f"{info['createdAt']} by {info['createdBy']}")
    config = Table("FIELD", "VALUE", title="config", title_justify="left")
    for key, value in sorted(info["config"].items()):
        if value not in (None, [], {}, ""):
            config.add_row(key, value if isinstance(value, str) else json.dumps(value))
    return Group(head, config)


def list_functions(
    ctx: typer.Context,
    fields: dict[str, Any],
    *,
    tenant: str | None,
    namespace: str | None,
    **given: Any,
) -> None:
    """List the functions of a namespace (default public/default)."""
    from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT

    call = Call.of(given, function=False)
    where = f"{tenant or DEFAULT_TENANT}/{namespace or DEFAULT_NAMESPACE}"
    with call.client() as client:
        names = client.json("GET", f"{FUNCTIONS}/{where}")

    def table(names: list[str]) -> RenderableType:
        if not names:
            return f"no functions in {where}"
        drawn = Table("FUNCTION")
        for name in names:
            drawn.add_row(f"{where}/{name}")
        return drawn

    show(call, names, table)


def delete(ctx: typer.Context, fields: dict[str, Any], **given: Any) -> None:
    """Delete a function: stop it and forget its versions, state, stats and checkpoint."""
    call = Call.of(given)
    with call.client() as client:
        info = client.json("DELETE", call.path)
    show(call, info, lambda info: f"deleted function {info['fqfn']} (at version {info['version']})")


def _action(action: str, done: str, doc: str, per_instance: bool) -> Callable[..., None]:
    """The command that POSTs ``action`` (start, stop, ...) to a function or one instance."""

    def act(
        ctx: typer.Context, fields: dict[str, Any], *, instance_id: int | None = None, **given: Any
    ) -> None:
        call = Call.of(given)
        where = call.path if instance_id is None else f"{call.path}/{instance_id}"
        with call.client() as client:
            client.request("POST", f"{where}/{action}")
        what = f"function {call.fqfn}"
        if instance_id is not None:
            what = f"instance {instance_id} of {what}"
        body = {"fqfn": call.fqfn, "instanceId": instance_id, "action": action}
        show(call, body, lambda _: f"{done} {what}")

    act.__name__ = f"{action}_function"
    act.__doc__ = doc
    flags = (*TARGET, INSTANCE_ID, *CONNECTION) if per_instance else (*TARGET, *CONNECTION)
    return takes("function", flags)(act)


ACTIONS = (
    ("start", "started", "Start a stopped function (or one instance).", True),
    ("stop", "stopped", "Stop a function (or one instance); it stays stopped until start.", True),
    ("restart", "restarted", "Restart a function (or one instance).", True),
    ("drain", "drained", "Process what the inputs hold, then stop the function.", False),
    ("suspend", "suspended", "Stop a function at once, to resume exactly there on start.", False),
)


def add_admin_commands(app: typer.Typer) -> None:
    """Add every command that talks to a worker to the ``functions`` group ``app``."""
    from sparkfn.cli import admin_state, admin_status, admin_submit

    admin_submit.add_commands(app)
    app.command("get")(takes("function", (*TARGET, VERSION, *CONNECTION))(get))
    app.command("list")(takes("function", (*TARGET[:2], *CONNECTION))(list_functions))
    admin_status.add_commands(app)
    for action, done, doc, per_instance in ACTIONS:
        app.command(action)(_action(action, done, doc, per_instance))
    app.command("delete")(takes("function", (*TARGET, *CONNECTION))(delete))
    admin_state.add_commands(app)
