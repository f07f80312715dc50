"""``sparkfn functions create|update``: submit a function to a worker.

::

    sparkfn functions create --py examples/wordcount.py --classname wordcount.WordCount \\
        --inputs sentences --output echo --processing-guarantees effectively_once
    sparkfn functions create --function-config-file wordcount.yaml --url http://worker:6750
    sparkfn functions update --name wordcount --parallelism 4        # the rest as it was
    sparkfn functions update --name wordcount --py wordcount_v2.py --stop-mode suspend

Both take the flags ``functions localrun`` takes for the config (Pulsar's
names and ``--function-config-file`` with Pulsar's camelCase YAML: the same
declarations, :data:`sparkfn.cli.options.FUNCTION_CONFIG`, read by the same
assembly, :func:`sparkfn.cli.configs.function_config_json`), so a function
that runs under ``localrun`` is submitted by changing the command's name.
``--py`` names the package on this machine (a ``.py``, ``.zip`` or ``.whl``):
it is uploaded with the request. The config is checked here first, so a
mistake costs no upload; what needs the worker (topics exist, the code loads)
is checked there.

``update``, as Pulsar's, changes what its flags and file give and keeps the
rest of the current version, code included unless ``--py`` is given; the
running version ends by ``--stop-mode`` (drain, default, or suspend) and the
new one takes over its subscription. ``--output`` is the output topic here,
as in Pulsar, so the output format is ``--output-format``.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer

from sparkfn.cli.admin_client import FUNCTIONS, TOKEN, URL, Call, option, output_flag, show
from sparkfn.cli.configs import function_config_json
from sparkfn.cli.context import note
from sparkfn.cli.flags import RUN_PANEL, takes
from sparkfn.cli.localrun import CONFIG_FILE
from sparkfn.cli.options import FUNCTION_CONFIG

SUBMIT = (*FUNCTION_CONFIG, CONFIG_FILE, URL, TOKEN, output_flag("--output-format"))
STOP_MODE = option(
    "--stop-mode",
    "How the running version ends: drain (finish what it took) or suspend.",
    "MODE",
    str,
    "drain",
    panel=RUN_PANEL,
)
# Sent as the request's own fields, not the config's.
_NOT_CONFIG = ("py", "fqfn")


def create(
    ctx: typer.Context, fields: dict[str, Any], *, config_file: Path | None, **given: Any
) -> None:
    """Submit a function to a worker: it registers version 1 and starts it."""
    call = Call.of(given, function=False)
    submitted = function_config_json(fields, config_file)
    config = _checked(submitted)
    _submit(call, "POST", f"{FUNCTIONS}/{config.fqfn}", submitted, config.py, {}, "created")


def update(
    ctx: typer.Context,
    fields: dict[str, Any],
    *,
    config_file: Path | None,
    stop_mode: str,
    update_auth_data: bool | None,
    **given: Any,
) -> None:
    """Update a worker's function to a new version: what the flags give, the rest as it was."""
    if update_auth_data is not None:
        note("warning: --update-auth-data: a function keeps no auth data of its caller; ignored")
    if stop_mode not in ("drain", "suspend"):
        msg = f"drain or suspend (got {stop_mode!r})"
        raise typer.BadParameter(msg, param_hint="--stop-mode")
    call = Call.of(given, function=False)
    changes = function_config_json(fields, config_file)
    path = f"{FUNCTIONS}/{_fqfn(changes)}"
    with call.client() as client:
        current = client.json("GET", path)  # Pulsar's FunctionConfig JSON
    submitted = updated(current, changes)
    config = _checked(submitted)
    _submit(call, "PUT", path, submitted, config.py, {"mode": stop_mode}, "updated")


def updated(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """What an update submits: the function's config as ``get`` shows it (``current``), with
    what the flags give over it (``changes``). The rest stays as it was, as pulsar-admin's
    update keeps it; a field is unset by Pulsar's own spelling of unset (``-1`` for
    ``--max-message-retries``)."""
    from sparkfn.config.function import FunctionConfig
    from sparkfn.config.pulsar import function_fields, overlay
    from sparkfn.config.pulsar_view import config_fields

    read = function_fields(config_fields(current), known=FunctionConfig.model_fields).fields
    # The worker's copy of the code stays the function's unless --py replaces it.
    kept = {k: v for k, v in read.items() if k != "py"}
    return overlay(kept, changes)


def _checked(submitted: dict[str, Any]) -> Any:
    """The config the worker will build from ``submitted``, checked here; warnings on stderr."""
    from sparkfn.config.function import FunctionConfig

    config, warnings = FunctionConfig.assemble(submitted)
    for warning in warnings:
        note(f"warning: {warning}")
    return config


def _fqfn(fields: dict[str, Any]) -> str:
    """The function a config names (Pulsar's defaults for tenant and namespace)."""
    from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT, FunctionName

    if fields.get("fqfn"):
        return str(FunctionName.parse(str(fields["fqfn"]), field="--fqfn"))
    if not fields.get("name"):
        msg = "which function? Give --name (with --tenant and --namespace) or --fqfn"
        raise typer.BadParameter(msg, param_hint="--name")
    tenant = fields.get("tenant") or DEFAULT_TENANT
    namespace = fields.get("namespace") or DEFAULT_NAMESPACE
    return str(FunctionName.parse(f"{tenant}/{namespace}/{fields['name']}", field="function"))


def _submit(
    call: Call,
    method: str,
    path: str,
    submitted: dict[str, Any],
    package: str | None,
    extra: dict[str, str],
    done: str,
) -> None:
    """Send the config (and the package, if any) as Pulsar's multipart form; show the answer."""
    config_json = json.dumps({k: v for k, v in submitted.items() if k not in _NOT_CONFIG})
    form: dict[str, Any] = {"functionConfig": (None, config_json)}
    form.update({key: (None, value) for key, value in extra.items()})
    with ExitStack() as stack:
        if package:
            code = Path(package).expanduser()
            try:
                form["data"] = (code.name, stack.enter_context(code.open("rb")))
            except OSError as exc:
                msg = f"cannot read the package {code}: {exc.strerror or exc}"
                raise typer.BadParameter(msg, param_hint="--py") from None
        client = stack.enter_context(call.client())
        info = client.json(method, path, files=form)
    show(call, info, lambda info: f"{done} function {info['fqfn']} (version {info['version']})")


def add_commands(app: typer.Typer) -> None:
    """Add ``create`` and ``update`` to the ``functions`` group ``app``."""
    from sparkfn.cli.pulsar_flags import UPDATE_AUTH_DATA

    app.command("create")(takes("function", SUBMIT)(create))
    app.command("update")(takes("function", (*SUBMIT, STOP_MODE, UPDATE_AUTH_DATA))(update))
