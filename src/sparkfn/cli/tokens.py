"""``sparkfn tokens``: bearer tokens for a worker with auth on.

::

    sparkfn tokens create --subject ops --role superuser --expiry 1d
    sparkfn tokens create --subject ci --role tenant_admin --tenant acme --expiry 12h \\
        --config-file worker.yml
    curl -H "Authorization: Bearer $(sparkfn tokens create --subject ops --role superuser \\
        --expiry 1h)" http://127.0.0.1:6750/admin/v3/functions/public/default

The token is signed with the key the worker is configured with, read the
same way ``sparkfn worker start`` reads it: ``--config-file``, else the
``SPARKFN_WORKER_TOKEN_SECRET_KEY`` (HS256) or ``SPARKFN_WORKER_TOKEN_PRIVATE_KEY``
(RS256) variable. Only the token is printed on stdout, so a shell can keep it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

import typer

from sparkfn.cli.context import StoreOptions
from sparkfn.cli.params import parse_duration

# The values of sparkfn.worker.auth.tokens.Role, spelled here so that `sparkfn --help`
# does not import PyJWT and cryptography.
RoleName = Literal["superuser", "tenant_admin"]

tokens_app = typer.Typer(help="Create bearer tokens for a worker with auth on.")


@tokens_app.command("create")
def create(
    ctx: typer.Context,
    subject: Annotated[str, typer.Option("--subject", help="Who the token names (its sub claim).")],
    role: Annotated[
        RoleName,
        typer.Option("--role", help="superuser (everything) or tenant_admin (one tenant)."),
    ],
    expiry: Annotated[
        timedelta,
        typer.Option(
            "--expiry",
            parser=parse_duration,
            metavar="DURATION",
            help="How long the token is valid: 30m, 12h, 1d, 2w.",
        ),
    ],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="The tenant of a tenant_admin.")
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option("--config-file", help="The worker's YAML settings holding the key."),
    ] = None,
) -> None:
    """Print a token signed with the worker's key (token_secret_key or token_private_key)."""
    from sparkfn.api.errors import ConfigError
    from sparkfn.worker.auth.tokens import Principal, Role
    from sparkfn.worker.settings import WorkerSettings

    wanted = Role(role)
    if wanted is Role.SUPERUSER and tenant is not None:
        msg = "--tenant is for --role tenant_admin; a superuser uses every tenant"
        raise typer.BadParameter(msg, param_hint="--tenant")
    if wanted is Role.TENANT_ADMIN and tenant is None:
        msg = "--role tenant_admin needs --tenant"
        raise typer.BadParameter(msg, param_hint="--tenant")
    options = ctx.find_object(StoreOptions) or StoreOptions()
    settings = WorkerSettings.resolve(
        config_file=config_file, data_dir=options.data_dir, store_url=options.store_url
    )
    if not settings.has_token_key:
        msg = (
            "no token key is configured: set token_secret_key (HS256) or token_private_key "
            "(RS256) in --config-file or as SPARKFN_WORKER_TOKEN_SECRET_KEY / "
            "SPARKFN_WORKER_TOKEN_PRIVATE_KEY"
        )
        raise ConfigError(msg)
    token = settings.token_keys().issue(Principal(subject, wanted, tenant), expiry)
    typer.echo(token)
