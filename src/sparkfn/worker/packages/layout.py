"""How a stored package is laid out on disk, so Spark's Python workers can import it.

Every package lives in ``<packages dir>/<sha256 hex>/``, next to the file as
it was uploaded:

==========  ===========================================================================
kind        what is added
==========  ===========================================================================
``py``      nothing: a function config's ``py`` names the file
``zip``     ``files/``, the archive unpacked (checked by :mod:`sparkfn.worker.packages.archives`);
            ``site/``, its dependencies, when it carries wheels or a ``requirements.txt``
``whl``     ``site/``, the wheel installed with its dependencies
==========  ===========================================================================

plus :data:`~sparkfn.runtime.spark.isolation.MANIFEST`, listing the directories to
put on ``sys.path`` (code first, then ``site/``); a function config's ``py``
then names the package directory and :mod:`sparkfn.runtime.spark.isolation`
enters it before the function loads.

A zip's code is at its root, or, in Pulsar's layout, under ``<name>/src/``
with wheels in ``<name>/deps/``. Its dependencies are its
``requirements.txt`` (at the code's root, or beside ``src/``) if it has
one, else every wheel it carries; either way its wheels are offered to pip
first (:mod:`sparkfn.worker.packages.dependencies`). The code, the wheels' expansion
and what pip installed together count against ``max_expanded_bytes``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sparkfn.api.errors import PackageTooLargeError
from sparkfn.runtime.spark.isolation import MANIFEST
from sparkfn.worker.packages.archives import extract, scan
from sparkfn.worker.packages.dependencies import pip_install

FILES = "files"
SITE = "site"
REQUIREMENTS = "requirements.txt"


def lay_out(
    kind: str, upload: Path, stage: Path, *, max_expanded_bytes: int, index_url: str
) -> None:
    """Unpack ``upload`` (of ``kind``) in ``stage``, the package's directory to be.

    Raises the package errors of :mod:`sparkfn.worker.packages.archives` and
    :mod:`sparkfn.worker.packages.dependencies`; the caller removes ``stage`` then.
    """
    name = upload.name
    site = stage / SITE
    if kind == "zip":
        files = stage / FILES
        used = extract(upload, files, limit=max_expanded_bytes, name=name)
        code = _code_root(files)
        wheels = sorted(files.rglob("*.whl"))
        for wheel in wheels:
            inner = f"{name}:{wheel.relative_to(files).as_posix()}"
            used += scan(wheel, limit=max_expanded_bytes - used, name=inner)
        requirements = _requirements(code, files)
        paths = [code]
        if requirements is not None or wheels:
            what = ["-r", str(requirements)] if requirements else [str(w) for w in wheels]
            links = sorted({w.parent for w in wheels})
            cwd = requirements.parent if requirements else files
            pip_install(site, what, find_links=links, index_url=index_url, name=name, cwd=cwd)
            paths.append(site)
        _check_size(name, [files, site], max_expanded_bytes)
    elif kind == "whl":
        scan(upload, limit=max_expanded_bytes, name=name)
        pip_install(site, [str(upload)], find_links=[], index_url=index_url, name=name, cwd=stage)
        _check_size(name, [site], max_expanded_bytes)
        paths = [site]
    else:
        return
    listed = [p.relative_to(stage).as_posix() for p in paths]
    (stage / MANIFEST).write_text(json.dumps({"kind": kind, "paths": listed}))


def _code_root(files: Path) -> Path:
    """``files`` itself, or ``<name>/src`` for a zip in Pulsar's layout."""
    top = [p for p in files.iterdir() if p.name != "__MACOSX"]
    if len(top) == 1 and (top[0] / "src").is_dir():
        return top[0] / "src"
    return files


def _requirements(code: Path, files: Path) -> Path | None:
    """The zip's requirements file: at the code's root, or beside Pulsar's ``src/``."""
    places = (
        [code / REQUIREMENTS]
        if code == files
        else [code / REQUIREMENTS, code.parent / REQUIREMENTS]
    )
    return next((p for p in places if p.is_file()), None)


def _check_size(name: str, roots: list[Path], limit: int) -> None:
    """Refuse a package whose directories (dependencies included) hold more than ``limit``."""
    total = 0
    for root in roots:
        for folder, _, names in os.walk(root):
            total += sum(os.lstat(os.path.join(folder, n)).st_size for n in names)
    if total > limit:
        msg = (
            f"package {name} takes {total} bytes once unpacked with its dependencies, past the "
            f"worker's limit of {limit} bytes (max_expanded_bytes)"
        )
        raise PackageTooLargeError(msg)
