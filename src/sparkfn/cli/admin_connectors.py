"""``sparkfn sources|sinks create|update|delete|get|list``: a worker's sources and sinks.

The commands on a running one (``status``, ``stats``, ``start``, ``stop``, ...)
and ``available`` are in :mod:`sparkfn.cli.admin_connector_runs`; this module
adds them all to the group, as ``pulsar-admin`` has them.

::

    sparkfn sources create --name gen --source-type generator --destination-topic-name out \\
        --source-config '{"count": 20000, "rate": 500}'
    sparkfn sources update --name gen --parallelism 2            # the rest as it was
    sparkfn sinks create --name archive --sink-type file --inputs out \\
        --sink-config 'path: /data/out-{instance}.jsonl'
    sparkfn sinks create --name mine --archive mysink.py --inputs out
    sparkfn sources status --name gen --instance-id 0
    sparkfn sinks available

The config flags are ``sources localrun``'s and ``sinks localrun``'s
(Pulsar's names: ``--source-type``, ``--source-config`` JSON or YAML,
``--source-config-file``, ``--destination-topic-name``, ``--inputs``,
``--topics-pattern``, ``--parallelism``, ``--processing-guarantees``), plus
``--archive``: ``builtin://<type>``, a package on this machine (``.py``,
``.zip`` or ``.whl``: uploaded with the request) or an uploaded package's
path or ``sha256:`` digest on the worker. The config is checked here first;
what needs the worker (the topics exist, the code loads) is checked there.
``update`` changes what its flags give and keeps the rest. Errors are one
``error [reason]: ...`` line, never a traceback.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType
from rich.table import Table

from sparkfn.cli.admin_client import (
    CONNECTION,
    CONNECTION_PULSAR,
    INSTANCE_ID,
    TOKEN,
    URL,
    Call,
    option,
    output_flag,
    show,
)
from sparkfn.cli.admin_connector_runs import (
    ACTIONS,
    action_command,
    available_command,
    connector_call,
    fields_table,
    status_command,
    target,
)
from sparkfn.cli.flags import takes
from sparkfn.cli.localrun import CONFIG_FILE
from sparkfn.cli.options import SINK_CONFIG, SOURCE_CONFIG, TOPICS_PATTERN

ARCHIVE = option(
    "--archive",
    "builtin://TYPE, a package file here (.py, .zip, .whl) or an uploaded package's path "
    "or sha256: digest on the worker.",
    "ARCHIVE",
)
STOP_MODE = option(
    "--stop-mode", "How the running version ends: drain (default) or suspend.", "MODE", str, "drain"
)
VERSION = option("--version", "A version (default: the current one).", "N", int | None, min=1)
_NOT_SENT = ("py", "version", "packageDigest", "createdBy", "createdAt", "warnings", "archive")


def _archive(kind: str, archive: str | None, fields: dict[str, Any]) -> tuple[str | None, str]:
    """Where the code comes from: (a package file to upload, or None; a worker reference)."""
    if not archive:
        return fields.get("py"), ""
    if archive.startswith("builtin://"):
        fields[f"{kind}_type"] = archive.removeprefix("builtin://")
        return None, ""
    if Path(archive).expanduser().is_file():
        fields["py"] = archive
        return archive, ""
    return None, archive


def _typed(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The flags' values as the config's fields want them (integers, enums), unset ones out."""
    from sparkfn.cli.configs import config_fields, field_kinds
    from sparkfn.config.connector import SinkConfig, SourceConfig

    integers, enums, _ = field_kinds(SourceConfig if kind == "source" else SinkConfig)
    return {
        k: v
        for k, v in config_fields(fields, integers=integers, enums=enums).items()
        if v is not None
    }


def _config_json(config: Any) -> dict[str, Any]:
    return {k: v for k, v in config.model_dump(mode="json").items() if k != "py"}


def _checked(kind: str, fields: dict[str, Any], reference: str) -> Any:
    from sparkfn.config.connector import SinkConfig, SourceConfig

    model = SourceConfig if kind == "source" else SinkConfig
    check = dict(fields)
    if reference and not any(check.get(k) for k in ("py", "classname", f"{kind}_type")):
        check["py"] = reference  # the worker's package gives the code: stand in for it here
    return model.build(**check)


def _submit(
    call: Call,
    kind: str,
    method: str,
    config: Any,
    package: str | None,
    reference: str,
    extra: dict[str, str],
    done: str,
) -> None:
    form: dict[str, Any] = {f"{kind}Config": (None, json.dumps(_config_json(config)))}
    form.update({key: (None, value) for key, value in extra.items()})
    if reference:
        form["url"] = (None, reference)
    with ExitStack() as stack:
        if package:
            code = Path(package).expanduser()
            try:
                form["data"] = (code.name, stack.enter_context(code.open("rb")))
            except OSError as exc:
                msg = f"cannot read the package {code}: {exc.strerror or exc}"
                raise typer.BadParameter(msg, param_hint="--archive") from None
        client = stack.enter_context(call.client())
        info = client.json(method, call.path, files=form)
    for warning in info.get("warnings", []):
        typer.echo(f"warning: {warning}", err=True)
    fqn = f"{info['tenant']}/{info['namespace']}/{info['name']}"
    show(call, info, lambda _: f"{done} {kind} {fqn} (version {info['version']})")


def _create(kind: str) -> Any:
    def create(
        ctx: typer.Context,
        fields: dict[str, Any],
        *,
        config_file: Path | None,
        archive: str | None,
        **given: Any,
    ) -> None:
        from sparkfn.cli.configs import connector_config

        package, reference = _archive(kind, archive, fields)
        if reference and not fields.get("classname"):
            fields["py"] = reference
        config, warnings = connector_config(kind, fields, config_file)
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
        if reference:
            config = config.model_copy(update={"py": None})
        call = Call(
            given["url"], given["token"], given["output_format"], f"/admin/v3/{kind}s/{config.fqn}"
        )
        _submit(call, kind, "POST", config, package, reference, {}, "created")

    create.__doc__ = f"Submit a {kind} to a worker: it registers version 1 and starts it."
    return create


def _update(kind: str) -> Any:
    def update(
        ctx: typer.Context,
        fields: dict[str, Any],
        *,
        config_file: Path | None,
        archive: str | None,
        stop_mode: str,
        **given: Any,
    ) -> None:
        from sparkfn.config.function import read_yaml_fields
        from sparkfn.config.pulsar_connector import connector_fields

        if stop_mode not in ("drain", "suspend"):
            msg = f"drain or suspend (got {stop_mode!r})"
            raise typer.BadParameter(msg, param_hint="--stop-mode")
        package, reference = _archive(kind, archive, fields)
        layers: list[dict[str, Any]] = []
        if config_file is not None:
            layers.append(read_yaml_fields(config_file, f"{kind} config file"))
        flags = {k: v for k, v in fields.items() if v is not None}
        if flags:
            layers.append(_typed(kind, fields))
        translated = connector_fields(kind, *layers)
        changes = translated.fields
        call = connector_call(kind, {**given, **changes})
        with call.client() as client:
            current = client.json("GET", call.path)
        kept = connector_fields(
            kind, {k: v for k, v in current.items() if k not in _NOT_SENT and v is not None}
        ).fields
        for key in translated.unset:  # --max-redeliver-count -1: Pulsar's unset, not kept
            kept.pop(key, None)
        code = {"py", "classname", f"{kind}_type"}
        if code & set(changes) or package or reference:
            kept = {k: v for k, v in kept.items() if k not in code}
        config = _checked(kind, {**kept, **changes}, reference)
        if reference or not changes.get("py"):
            config = config.model_copy(update={"py": None})
        _submit(call, kind, "PUT", config, package, reference, {"mode": stop_mode}, "updated")

    update.__doc__ = (
        f"Update a worker's {kind} to a new version: what the flags give, the rest kept."
    )
    return update


def _get(kind: str) -> Any:
    def get(
        ctx: typer.Context, fields: dict[str, Any], *, version: int | None, **given: Any
    ) -> None:
        call = connector_call(kind, given)
        with call.client() as client:
            info = client.json(
                "GET", call.path, params={} if version is None else {"version": version}
            )
        show(call, info, fields_table)

    get.__doc__ = f"Show a {kind}'s config (Pulsar's JSON): the current version, or --version N."
    return get


def _list(kind: str) -> Any:
    def list_names(ctx: typer.Context, fields: dict[str, Any], **given: Any) -> None:
        from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT

        where = (
            f"{given.get('tenant') or DEFAULT_TENANT}/{given.get('namespace') or DEFAULT_NAMESPACE}"
        )
        call = connector_call(kind, given, named=False)
        with call.client() as client:
            names = client.json("GET", f"{call.path}/{where}")

        def table(names: list[str]) -> RenderableType:
            if not names:
                return f"no {kind}s in {where}"
            drawn = Table(kind.upper())
            for name in names:
                drawn.add_row(f"{where}/{name}")
            return drawn

        show(call, names, table)

    list_names.__doc__ = f"List the {kind}s of a namespace (default public/default)."
    return list_names


def _delete(kind: str) -> Any:
    def delete(ctx: typer.Context, fields: dict[str, Any], **given: Any) -> None:
        call = connector_call(kind, given)
        with call.client() as client:
            info = client.json("DELETE", call.path)
        fqn = f"{info['tenant']}/{info['namespace']}/{info['name']}"
        show(call, info, lambda _: f"deleted {kind} {fqn} (at version {info['version']})")

    delete.__doc__ = f"Delete a {kind}: stop it and forget its versions, records and progress."
    return delete


def add_connector_commands(app: typer.Typer, kind: str) -> None:
    """Add the worker commands to the ``sources`` (``kind`` ``source``) or ``sinks`` group."""
    config = SOURCE_CONFIG if kind == "source" else (*SINK_CONFIG, TOPICS_PATTERN)
    # A source's --output is its topic (Pulsar's --destination-topic-name); a sink has none.
    shown = output_flag("--output-format") if kind == "source" else CONNECTION[2]
    submit = (*config, CONFIG_FILE, ARCHIVE, URL, TOKEN, shown)
    named, connection = target(kind), CONNECTION
    app.command("create")(takes(kind, submit)(_create(kind)))
    app.command("update")(takes(kind, (*submit, STOP_MODE))(_update(kind)))
    # As pulsar-admin: get, list, status and stats print JSON unless --output table.
    app.command("get")(takes(kind, (*named, VERSION, *CONNECTION_PULSAR))(_get(kind)))
    app.command("list")(takes(kind, (*named[:2], *CONNECTION_PULSAR))(_list(kind)))
    app.command("delete")(takes(kind, (*named, *connection))(_delete(kind)))
    for what in ("status", "stats"):
        flags = (*named, INSTANCE_ID, *CONNECTION_PULSAR)
        app.command(what)(takes(kind, flags)(status_command(kind, what)))
    for action, done, per_instance in ACTIONS:
        app.command(action)(action_command(kind, action, done, per_instance))
    app.command("available")(takes(kind, connection)(available_command(kind)))
