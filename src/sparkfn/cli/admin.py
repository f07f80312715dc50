"""``sparkfn functions get|list|delete|start|stop|restart|drain|suspend``: a worker's functions.

::

    sparkfn functions list --tenant public --namespace default
    sparkfn functions get --name wordcount --version 1
    sparkfn functions stop --fqfn public/default/wordcount --instance-id 0
    sparkfn functions drain --fqfn public/default/wordcount --instance-id 1
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
import time
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Group, RenderableType
from rich.table import Table

from sparkfn.api.errors import WorkerError
from sparkfn.cli.admin_client import (
    CONNECTION,
    CONNECTION_PULSAR,
    FUNCTIONS,
    INSTANCE_ID,
    TARGET,
    AdminClient,
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
    from sparkfn.config.pulsar_view import config_fields

    head = Table.grid(padding=(0, 2))
    head.add_row("function", f"{info['fqfn']}  version {info['version']}")
    head.add_row("package", str(info.get("packageDigest") or "-"))
    head.add_row("created", f"{info['createdAt']} by {info['createdBy']}")
    config = Table("FIELD", "VALUE", title="config", title_justify="left")
    for key, value in sorted(config_fields(info).items()):
        if key not in ("tenant", "namespace", "name", "fqfn") and value not in (None, [], {}, ""):
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


WAIT = option(
    "--wait",
    "Wait until it has stopped (the default, as pulsar-admin does); "
    "--no-wait returns once the worker took the stop.",
    None,
    bool | None,
)
STOP_TIMEOUT = option(
    "--timeout", "Seconds to wait for the stop.", "SECONDS", float, 120.0, min=0.1, max=3600.0
)
STOP_POLL_SECONDS = 0.2
# States in which nothing of the function (or instance) runs: the final ones, and never started.
STOPPED_STATES = ("STOPPED", "SUSPENDED", "ERROR", "CREATED")


def _action(action: str, done: str, doc: str, per_instance: bool) -> Callable[..., None]:
    """The command that POSTs ``action`` (start, stop, ...) to a function or one instance.

    ``stop`` then waits until the function or instance has stopped, unless ``--no-wait``.
    """
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
        call = Call.of(given)
        where = call.path if instance_id is None else f"{call.path}/{instance_id}"
        what = f"function {call.fqfn}"
        if instance_id is not None:
            what = f"instance {instance_id} of {what}"
        body: dict[str, Any] = {"fqfn": call.fqfn, "instanceId": instance_id, "action": action}
        with call.client() as client:
            said = post_action(client, where, what, action, done, body, wait=wait, timeout=timeout)
        show(call, body, lambda _: said)

    act.__name__ = f"{action}_function"
    act.__doc__ = doc
    flags = (*TARGET, INSTANCE_ID, *CONNECTION) if per_instance else (*TARGET, *CONNECTION)
    if waits:
        flags = (*flags, WAIT, STOP_TIMEOUT)
    return takes("function", flags)(act)


def post_action(
    client: AdminClient,
    where: str,
    what: str,
    action: str,
    done: str,
    body: dict[str, Any],
    *,
    wait: bool | None,
    timeout: float,
) -> str:
    """POST ``action`` to ``where`` (a function, source or sink, or one instance); a
    ``stop`` then waits for it to have stopped unless ``wait`` is False, its state put
    in ``body``. Returns the line that says what was done."""
    client.request("POST", f"{where}/{action}")
    if action == "stop":
        if wait is False:  # said as it is: it may well still be running
            return f"asked {what} to stop; not waiting (--no-wait)"
        body["state"] = _wait_stopped(client, where, what, timeout)
    return f"{done} {what}" + (f" ({body['state']})" if "state" in body else "")


def _wait_stopped(client: AdminClient, where: str, what: str, timeout: float) -> str:
    """The state ``where`` (a function or an instance) stopped in; an error if not in ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        state = str(client.json("GET", f"{where}/status").get("state", ""))
        if state in STOPPED_STATES:
            return state
        if time.monotonic() >= deadline:
            msg = (
                f"{what} is still {state} after {timeout:g} s; the worker goes on stopping it "
                "(sparkfn functions status shows when it has; --timeout waits longer)"
            )
            raise WorkerError(msg, reason="stop_timeout")
        time.sleep(STOP_POLL_SECONDS)


ACTIONS = (
    ("start", "started", "Start a stopped function (or one instance).", True),
    (
        "stop",
        "stopped",
        "Stop a function (or one instance) and wait until it has; it stays stopped until start.",
        True,
    ),
    ("restart", "restarted", "Restart a function (or one instance).", True),
    (
        "drain",
        "drained",
        "Process what the inputs hold, then stop the function (or one instance: the others "
        "take its share).",
        True,
    ),
    (
        "suspend",
        "suspended",
        "Stop a function (or one instance) at the next batch boundary, to resume there on start.",
        True,
    ),
)


def add_admin_commands(app: typer.Typer) -> None:
    """Add every command that talks to a worker to the ``functions`` group ``app``."""
    from sparkfn.cli import admin_logs, admin_state, admin_status, admin_submit

    admin_submit.add_commands(app)
    # get and list print pulsar-admin's JSON by default (--output table: a table).
    app.command("get")(takes("function", (*TARGET, VERSION, *CONNECTION_PULSAR))(get))
    app.command("list")(takes("function", (*TARGET[:2], *CONNECTION_PULSAR))(list_functions))
    admin_status.add_commands(app)
    for action, done, doc, per_instance in ACTIONS:
        app.command(action)(_action(action, done, doc, per_instance))
    app.command("delete")(takes("function", (*TARGET, *CONNECTION))(delete))
    admin_state.add_commands(app)
    admin_logs.add_commands(app)
