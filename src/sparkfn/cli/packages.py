"""``sparkfn packages upload|download|list``: function packages kept by a worker.

::

    sparkfn packages upload --source-file wordcount.zip --path acme/wordcount.zip
    sparkfn packages download --path acme/wordcount.zip --destination-file /tmp/wc.zip
    sparkfn packages list --output json

A package (a ``.py``, ``.zip`` or ``.whl``) is stored by the worker under its
content digest; an upload's ``--path`` is a name for it. A function created
later names it by that path or by ``sha256:<hex>`` (``functions create --url``
does not: it sends ``--py`` with the create). The options are Pulsar's
``functions upload`` and ``download``; ``--url``, ``--token`` and
``--output`` are as every admin command's (:mod:`sparkfn.cli.admin_client`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from sparkfn.cli.admin_client import CONNECTION, Call, option, show
from sparkfn.cli.flags import takes
from sparkfn.cli.params import format_size

packages_app = typer.Typer(
    name="packages",
    help="Upload, download and list the function packages a worker keeps.",
    no_args_is_help=True,
)

SOURCE_FILE = option(
    "--source-file", "The package to upload: a .py, .zip or .whl.", "PATH", Path, ...
)
PATH = option("--path", "The name the worker keeps it under (default: the file's name).", "PATH")
WANTED = option(
    "--path", "The package: an upload's path or its sha256:<hex> digest.", "PATH", str, ...
)
DESTINATION = option(
    "--destination-file",
    "Where to write it (default: the package's file name, here).",
    "PATH",
    Path | None,
)


def _table(packages: list[dict[str, Any]]) -> Table:
    table = Table("DIGEST", "FILE", "KIND", "SIZE", "UPLOADED", "BY", "PATHS")
    for package in packages:
        table.add_row(
            package["digest"].removeprefix("sha256:")[:12],
            package["filename"],
            package["kind"],
            format_size(package["sizeBytes"]),
            package["uploadedAt"][:19].replace("T", " "),
            package["uploadedBy"],
            ", ".join(package["paths"]) or "-",
        )
    return table


def upload(
    ctx: typer.Context, fields: dict[str, Any], *, source_file: Path, path: str | None, **given: Any
) -> None:
    """Upload a package to the worker, to be named by --path (or its digest) later."""
    call = Call.of(given, function=False)
    name = path or source_file.name
    try:
        data = source_file.open("rb")
    except OSError as exc:
        msg = f"cannot read {source_file}: {exc.strerror or exc}"
        raise typer.BadParameter(msg, param_hint="--source-file") from None
    with data, call.client() as client:
        files = {"data": (source_file.name, data), "path": (None, name)}
        package = client.json("POST", "/admin/v3/functions/upload", files=files)
    show(call, package, lambda package: _table([package]))


def download(
    ctx: typer.Context,
    fields: dict[str, Any],
    *,
    path: str,
    destination_file: Path | None,
    **given: Any,
) -> None:
    """Download a package from the worker to a file."""
    call = Call.of(given, function=False)
    target = destination_file or Path(
        Path(path).name if not path.startswith("sha256:") else path[7:19]
    )
    # Written beside the target and renamed into place, so a failed download leaves nothing.
    handle, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent.resolve())
    try:
        with os.fdopen(handle, "wb") as out, call.client() as client:
            client.save("/admin/v3/functions/download", out, params={"path": path})
        os.replace(partial, target)
    finally:
        Path(partial).unlink(missing_ok=True)
    body = {"path": path, "destinationFile": str(target), "sizeBytes": target.stat().st_size}
    show(
        call,
        body,
        lambda body: f"wrote {body['destinationFile']} ({format_size(body['sizeBytes'])})",
    )


def list_packages(ctx: typer.Context, fields: dict[str, Any], **given: Any) -> None:
    """List the packages the worker keeps."""
    call = Call.of(given, function=False)
    with call.client() as client:
        packages = client.json("GET", "/admin/v3/packages")
    show(call, packages, _table)


packages_app.command("upload")(takes("package", (SOURCE_FILE, PATH, *CONNECTION))(upload))
packages_app.command("download")(takes("package", (WANTED, DESTINATION, *CONNECTION))(download))
packages_app.command("list")(takes("package", CONNECTION)(list_packages))
