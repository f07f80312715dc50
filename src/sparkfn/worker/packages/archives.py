"""Unpacking an uploaded archive without trusting it.

A ``.zip`` package is unpacked into the package's own directory; a wheel
(uploaded, or inside a zip) is handed to pip, which unpacks it itself, so it
is scanned first. Either way every entry is checked before a byte of it is
written:

* its name must stay inside the target: no ``..`` part (zip slip), no
  absolute path or drive letter, no backslash tricks;
* it must be a regular file or a directory: a symbolic link (the Unix mode
  in the entry's external attributes) is refused, since a later entry could
  write through it;
* the bytes it really expands to are counted while they are decompressed,
  never taken from the headers, and the archive is refused as soon as the
  total passes the worker's ``max_expanded_bytes``; so is one with more than
  :data:`MAX_ENTRIES` entries.

Refusals are :class:`~sparkfn.api.errors.UnsafeArchiveError` (``unsafe_archive``),
:class:`~sparkfn.api.errors.PackageTooLargeError` (``package_too_large``) or,
for data that is not a readable zip, :class:`~sparkfn.api.errors.PackageError`
(``invalid_package``). A refused extraction may have written some files; the
caller unpacks into a staging directory and removes it whole.

>>> expanded = extract(Path("fn.zip"), Path("stage/files"), limit=500 * 2**20, name="fn.zip")
"""

from __future__ import annotations

import contextlib
import re
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO, Any

from sparkfn.api.errors import PackageError, PackageTooLargeError, UnsafeArchiveError
from sparkfn.store.failures import is_no_space

CHUNK = 1024 * 1024
MAX_ENTRIES = 50_000
_WHEEL = re.compile(r"[^/]+\.dist-info/WHEEL")  # a wheel's metadata, at its root


def extract(archive: Path, target: Path, *, limit: int, name: str) -> int:
    """Unpack ``archive`` into ``target``; returns the bytes written.

    ``name`` is how errors call the package (its uploaded file name).
    """
    with _open(archive, name) as zf:
        entries = _checked_entries(zf, name)
        budget = _Budget(limit, name)
        for info, parts in entries:
            with _member(zf, info, name) as src, _created(target, parts, info, name) as out:
                if out is not None:
                    _pump(src, out, budget, info.filename, name)
        return budget.used


def scan(archive: Path, *, limit: int, name: str) -> int:
    """Check ``archive`` as :func:`extract` would, writing nothing; returns its expanded size."""
    with _open(archive, name) as zf:
        budget = _Budget(limit, name)
        for info, _ in _checked_entries(zf, name):
            if not info.is_dir():
                with _member(zf, info, name) as src:
                    _pump(src, None, budget, info.filename, name)
        return budget.used


def entry_parts(filename: str, name: str) -> tuple[str, ...]:
    """The path parts of entry ``filename``; :class:`UnsafeArchiveError` if it would escape."""
    text = filename.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        msg = f"package {name}: entry {filename!r} is an absolute path; entries must be relative"
        raise UnsafeArchiveError(msg)
    parts = tuple(p for p in PurePosixPath(text).parts if p not in ("", "."))
    if ".." in parts:
        msg = (
            f"package {name}: entry {filename!r} climbs out of the package with '..' "
            "(zip slip); entries must stay inside it"
        )
        raise UnsafeArchiveError(msg)
    if not parts:
        msg = f"package {name}: entry {filename!r} has no name"
        raise UnsafeArchiveError(msg)
    return parts


class _Budget:
    """The bytes an archive may still expand to."""

    def __init__(self, limit: int, name: str) -> None:
        self.limit = limit
        self.name = name
        self.used = 0

    def take(self, count: int, entry: str) -> None:
        self.used += count
        if self.used > self.limit:
            msg = (
                f"package {self.name} expands past the worker's limit of {self.limit} bytes "
                f"(max_expanded_bytes), at entry {entry!r}"
            )
            raise PackageTooLargeError(msg)


def content_kind(archive: Path, name: str) -> str:
    """What ``archive``'s bytes are: ``whl`` (a zip with a ``*.dist-info/WHEEL`` at its
    root), ``zip`` (another zip), or ``py`` (not a zip archive); ``name`` is for errors."""
    if not zipfile.is_zipfile(archive):
        return "py"
    with _open(archive, name) as zf:
        names = zf.namelist()
    return "whl" if any(_WHEEL.fullmatch(entry) for entry in names) else "zip"


def _open(archive: Path, name: str) -> zipfile.ZipFile:
    if not zipfile.is_zipfile(archive):
        msg = f"package {name} is not a zip archive"
        raise PackageError(msg)
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        msg = f"package {name} is not a readable zip archive: {exc}"
        raise PackageError(msg) from None


def _checked_entries(
    zf: zipfile.ZipFile, name: str
) -> list[tuple[zipfile.ZipInfo, tuple[str, ...]]]:
    """Every entry with its path parts, after the checks that need no decompression."""
    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        msg = f"package {name} has {len(infos)} entries; the limit is {MAX_ENTRIES}"
        raise PackageTooLargeError(msg)
    checked = []
    for info in infos:
        parts = entry_parts(info.filename, name)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            msg = (
                f"package {name}: entry {info.filename!r} is a symbolic link; "
                "links are refused, since a later entry could write through them"
            )
            raise UnsafeArchiveError(msg)
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: only permissions
            msg = f"package {name}: entry {info.filename!r} is not a regular file or a directory"
            raise UnsafeArchiveError(msg)
        if info.flag_bits & 0x1:
            msg = f"package {name}: entry {info.filename!r} is encrypted"
            raise PackageError(msg)
        checked.append((info, parts))
    return checked


def _member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> IO[bytes]:
    try:
        return zf.open(info)
    except (zipfile.BadZipFile, NotImplementedError, OSError) as exc:
        msg = f"package {name}: entry {info.filename!r} cannot be read: {exc}"
        raise PackageError(msg) from None


def _created(target: Path, parts: tuple[str, ...], info: zipfile.ZipInfo, name: str) -> Any:
    """The file to write entry ``info`` to (a null context for a directory entry)."""
    dest = target.joinpath(*parts)
    try:
        if info.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            return contextlib.nullcontext(None)
        dest.parent.mkdir(parents=True, exist_ok=True)
        return dest.open("xb")
    except OSError as exc:  # a file and a directory of one name, or the same entry twice
        if is_no_space(exc):
            raise  # not the archive's fault: the upload reports a full disk
        msg = f"package {name}: entry {info.filename!r} cannot be written: {exc.strerror}"
        raise PackageError(msg) from None


def _pump(src: IO[bytes], out: IO[bytes] | None, budget: _Budget, entry: str, name: str) -> None:
    """Copy (or, without ``out``, just read) ``src``, charging what it really yields."""
    while True:
        try:
            chunk = src.read(CHUNK)
        except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:
            msg = f"package {name}: entry {entry!r} is corrupt: {exc}"
            raise PackageError(msg) from None
        if not chunk:
            return
        budget.take(len(chunk), entry)
        if out is not None:
            out.write(chunk)
