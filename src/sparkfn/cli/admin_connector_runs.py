"""``sparkfn sources|sinks status|stats|start|stop|restart|drain|suspend|available``.

How a worker's source or sink is doing, and the commands that act on a
running one (or one instance), as ``pulsar-admin`` has them; and the flags
and requests that name one, which :mod:`sparkfn.cli.admin_connectors`'
submit commands share. ``stop`` waits until the run (or the instance) has
stopped unless ``--no-wait``.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import RenderableType
from rich.table import Table

from sparkfn.cli.admin import STOP_TIMEOUT, WAIT, post_action
from sparkfn.cli.admin_client import CONNECTION, INSTANCE_ID, Call, option, show
from sparkfn.cli.flags import takes


def target(kind: str) -> tuple[Any, ...]:
    """The flags that name one source or sink: ``--tenant``, ``--namespace``, ``--name``."""
    return (
        option("--tenant", "Tenant (default public).", "NAME"),
        option("--namespace", "Namespace (default default).", "NAME"),
        option("--name", f"The {kind}'s name.", "NAME"),
    )


def connector_path(kind: str, given: dict[str, Any], field: str = "--name") -> str:
    """The REST path of the source or sink the flags name; ``BadParameter`` without ``--name``."""
    from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT, FunctionName

    if not given.get("name"):
        msg = f"which {kind}? Give --name (with --tenant and --namespace)"
        raise typer.BadParameter(msg, param_hint=field)
    tenant = given.get("tenant") or DEFAULT_TENANT
    namespace = given.get("namespace") or DEFAULT_NAMESPACE
    parsed = FunctionName.parse(f"{tenant}/{namespace}/{given['name']}", field=kind)
    return f"/admin/v3/{kind}s/{parsed}"


def connector_call(kind: str, given: dict[str, Any], *, named: bool = True) -> Call:
    """A request to the worker at the flags' URL: on the named one, or (not ``named``) the kind's."""
    path = connector_path(kind, given) if named else f"/admin/v3/{kind}s"
    return Call(given["url"], given["token"], given["output_format"], path)


def fields_table(info: dict[str, Any]) -> RenderableType:
    """A config or status as a table of its set fields."""
    table = Table("FIELD", "VALUE")
    for key, value in info.items():
        if value not in (None, [], {}, ""):
            table.add_row(key, value if isinstance(value, str) else json.dumps(value))
    return table


def status_command(kind: str, what: str) -> Any:
    """The ``status`` or ``stats`` command (``what``) of ``kind``."""

    def status(
        ctx: typer.Context, fields: dict[str, Any], *, instance_id: int | None, **given: Any
    ) -> None:
        call = connector_call(kind, given)
        where = call.path if instance_id is None else f"{call.path}/{instance_id}"
        with call.client() as client:
            body = client.json("GET", f"{where}/{what}")
        show(call, body, lambda body: _status_table(body, what))

    status.__doc__ = (
        f"Show a {kind}'s status (Pulsar's {kind.title()}Status), or one instance's."
        if what == "status"
        else f"Show a {kind}'s counters, or one instance's."
    )
    return status


def _status_table(body: dict[str, Any], what: str) -> RenderableType:
    rows = body.get("instances")
    if rows is None:
        return fields_table(body)
    table = Table(
        "INSTANCE", what.upper(), title=f"{body.get('name', '')}  {body.get('state', '')}"
    )
    for item in rows:
        data = item.get("status") or item.get("metrics") or item.get("stats") or {}
        shown = ", ".join(f"{k}={v}" for k, v in data.items() if not isinstance(v, dict | list))
        table.add_row(str(item.get("instanceId")), shown)
    return table


def action_command(kind: str, action: str, done: str, per_instance: bool) -> Any:
    """The command that POSTs ``action`` (``start``, ``stop``, ...), with its flags."""
    waits = action == "stop"

    def act(
        ctx: typer.Context,
        fields: dict[str, Any],
        *,
        instance_id: int | None = None,
        wait: bool | None = None,
        timeout: float = 0.0,
        **given: Any,
    ) -> None:
        call = connector_call(kind, given)
        fqn = call.path.removeprefix(f"/admin/v3/{kind}s/")
        where = call.path if instance_id is None else f"{call.path}/{instance_id}"
        what = f"{kind} {fqn}" if instance_id is None else f"instance {instance_id} of {kind} {fqn}"
        body: dict[str, Any] = {"name": fqn, "instanceId": instance_id, "action": action}
        with call.client() as client:
            said = post_action(client, where, what, action, done, body, wait=wait, timeout=timeout)
        show(call, body, lambda _: said)

    act.__name__ = f"{action}_{kind}"
    act.__doc__ = f"{action.title()} a {kind}" + (" (or one instance)." if per_instance else ".")
    flags: tuple[Any, ...] = (*target(kind), *CONNECTION)
    if per_instance:
        flags = (*flags, INSTANCE_ID)
    if waits:
        flags = (*flags, WAIT, STOP_TIMEOUT)
    return takes(kind, flags)(act)


def available_command(kind: str) -> Any:
    """The ``available`` command: the built-in connectors of ``kind`` and their fields."""

    def available(ctx: typer.Context, fields: dict[str, Any], **given: Any) -> None:
        call = connector_call(kind, given, named=False)
        with call.client() as client:
            found = client.json("GET", f"{call.path}/builtin{kind}s")

        def table(found: list[dict[str, Any]]) -> RenderableType:
            drawn = Table("NAME", "DESCRIPTION", "CONFIG FIELDS")
            for item in found:
                names = []
                for field in item.get("configFieldDefinitions", []):
                    required = field["attributes"].get("required") == "true"
                    names.append(field["fieldName"] + (" (required)" if required else ""))
                drawn.add_row(item["name"], item["description"], ", ".join(names))
            return drawn

        show(call, found, table)

    available.__doc__ = f"List the built-in {kind}s and their config fields."
    return available


ACTIONS = (
    ("start", "started", True),
    ("stop", "stopped", True),
    ("restart", "restarted", True),
    ("drain", "drained", True),
    ("suspend", "suspended", True),
)
