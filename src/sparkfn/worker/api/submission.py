"""What a create or update request of a function, source or sink shares.

The REST routes of each kind read their JSON form field and find the code
the same way: :func:`read_config_json` and :func:`package_for`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import UploadFile

from sparkfn.api.errors import ConfigError
from sparkfn.worker.auth.access import check_package_reference
from sparkfn.worker.auth.tokens import Principal
from sparkfn.worker.packages.owners import viewer
from sparkfn.worker.packages.store import Package, PackageStore


def read_config_json(config_json: str, what: str, form_name: str) -> dict[str, Any]:
    """The form field ``form_name`` as a JSON object (empty text: ``{}``)."""
    try:
        given = json.loads(config_json) if config_json.strip() else {}
    except json.JSONDecodeError as exc:
        msg = f"{what}: {form_name} is not JSON: {exc}"
        raise ConfigError(msg) from None
    if not isinstance(given, dict):
        msg = f"{what}: {form_name} must be a JSON object"
        raise ConfigError(msg)
    return given


@contextmanager
def package_for(
    packages: PackageStore,
    caller: Principal,
    *,
    what: str,
    owner: str,
    data: UploadFile | None,
    url: str | None,
    kept: str | None,
    names_py: bool,
    default_filename: str,
) -> Iterator[Package | None]:
    """The request's code: the upload ``data`` (held by ``owner`` from now on), the
    package ``url`` names, or the ``kept`` one of the current version; None if none.

    A package this request uploaded is discarded again if the block raises (the
    request was refused). ``names_py``: the config names a ``py`` file, which is
    on the client and cannot be read here.
    """
    upload = package = None
    if data is not None:
        filename = data.filename or default_filename
        upload = packages.upload(data.file, filename, who=caller.subject, owner=owner)
        package = upload.package
    elif url:
        check_package_reference(caller, url, "url")
        package = packages.resolve(url, viewer(caller))
    elif kept:
        package = packages.get(kept)
    elif names_py:
        msg = (
            f"{what}: py names a file on the client; upload it as the multipart "
            "field data, or name an uploaded package with url"
        )
        raise ConfigError(msg)
    try:
        yield package
    except BaseException:
        if upload is not None:
            packages.discard(upload)
        raise
