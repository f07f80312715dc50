"""Tiny packages made by the tests: wheels and zips built with the standard library only.

A wheel is a zip with ``<name>-<version>.dist-info/{METADATA,WHEEL,RECORD}``;
pip installs one built here like any other, with no index and no network.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path


def build_wheel(
    into: Path,
    name: str,
    version: str,
    files: Mapping[str, str],
    requires: Iterable[str] = (),
) -> Path:
    """A pure-Python wheel of ``files`` (archive path -> text) in directory ``into``."""
    info = f"{name}-{version}.dist-info"
    entries = dict(files)
    entries[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    entries[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: sparkfn-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [
        f"{path},sha256={_digest(text)},{len(text.encode())}" for path, text in entries.items()
    ]
    entries[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    into.mkdir(parents=True, exist_ok=True)
    wheel = into / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, text in entries.items():
            zf.writestr(path, text)
    return wheel


def build_zip(path: Path, entries: Mapping[str, str | bytes | Path]) -> Path:
    """A zip at ``path`` of ``entries`` (archive path -> text, bytes, or a file to copy)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in entries.items():
            if isinstance(content, Path):
                zf.write(content, name)
            else:
                zf.writestr(name, content)
    return path


def tinylib(into: Path, version: str) -> Path:
    """A wheel of ``tinylib`` whose ``VERSION`` is ``version`` (installed nowhere else)."""
    return build_wheel(
        into, "tinylib", version, {"tinylib/__init__.py": f"VERSION = {version!r}\n"}
    )


# A function that says which tinylib it got, at import and again in each call,
# and which process ran it.
REPORT = """\
import os

import tinylib


def process(value):
    import tinylib as now
    return f"{value}:{tinylib.VERSION}:{now.VERSION}:{os.getpid()}"
"""


def _digest(text: str) -> str:
    raw = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
