"""Installing a package's dependencies at registration, into the package's own directory.

pip, run with the worker's own interpreter (the one Spark's Python workers
run too), installs into ``<package>/site`` with ``--target``: nothing is
shared with the worker's environment or with another package, so two
functions may pin different versions of one library. Only wheels are
installed (``--only-binary :all:``): registration never builds or runs a
package's setup code. The wheels a package carries are offered first
(``--find-links``); where else pip looks follows the worker's
``package_index_url``: pip's own configuration when empty, nothing else with
``none``, or that index.

>>> pip_install(site, ["-r", "requirements.txt"], find_links=[wheels], index_url="none",
...             name="fn.zip", cwd=files)
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from sparkfn.api.errors import PackageError

NO_INDEX = "none"
TIMEOUT = 600.0  # seconds one pip install may take
TAIL = 2000  # characters of pip's output an error quotes


def pip_install(
    site: Path,
    what: Sequence[str],
    *,
    find_links: Sequence[Path],
    index_url: str,
    name: str,
    cwd: Path,
) -> None:
    """``pip install --target site what...`` run in ``cwd`` (where a requirements file's
    relative paths start); :class:`PackageError` quoting pip if it fails."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--target",
        str(site),
        "--only-binary",
        ":all:",
        "--no-cache-dir",
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--quiet",
    ]
    for place in find_links:
        command += ["--find-links", str(place)]
    if index_url == NO_INDEX:
        command.append("--no-index")
    elif index_url:
        command += ["--index-url", index_url]
    command += list(what)
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT, check=False, cwd=cwd
        )
    except subprocess.TimeoutExpired:
        msg = f"package {name}: installing its dependencies took longer than {TIMEOUT:.0f} s"
        raise PackageError(msg) from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        msg = (
            f"package {name}: its dependencies could not be installed "
            f"(pip install {' '.join(what)}): {said[-TAIL:]}"
        )
        raise PackageError(msg)
