"""Unpacking untrusted archives: every refusal, without Spark or a worker."""

from __future__ import annotations

import io
import stat
import struct
import zipfile
from pathlib import Path

import pytest
from wheels import build_zip

from sparkfn.api.errors import PackageError, PackageTooLargeError, UnsafeArchiveError
from sparkfn.worker.packages.archives import entry_parts, extract, scan

MIB = 1024 * 1024


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def _with_sizes(entry: bytes, declared: int) -> bytes:
    """A one-entry zip whose headers claim ``declared`` bytes for ``entry``'s real content."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data.bin", entry)
    raw = bytearray(buf.getvalue())
    struct.pack_into("<I", raw, 22, declared)  # the local header's uncompressed size
    central = raw.rfind(b"PK\x01\x02")
    struct.pack_into("<I", raw, central + 24, declared)  # the central directory's
    return bytes(raw)


def test_a_safe_archive_unpacks_with_its_real_size(tmp_path: Path) -> None:
    archive = build_zip(
        tmp_path / "fn.zip", {"fn.py": "x = 1\n", "lib/": "", "lib/a.py": "y = 2\n"}
    )
    target = tmp_path / "out"
    assert extract(archive, target, limit=MIB, name="fn.zip") == len("x = 1\n") + len("y = 2\n")
    assert _files(target) == ["fn.py", "lib", "lib/a.py"]
    assert (target / "lib" / "a.py").read_text() == "y = 2\n"
    assert scan(archive, limit=MIB, name="fn.zip") == 12


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("../evil.py", "climbs out of the package with '..' (zip slip)"),
        ("lib/../../evil.py", "zip slip"),
        ("..\\evil.py", "zip slip"),
        ("/etc/evil.py", "is an absolute path"),
        ("C:/evil.py", "is an absolute path"),
        ("\\\\server\\evil.py", "is an absolute path"),
    ],
)
def test_an_entry_outside_the_package_is_refused_before_anything_is_written(
    tmp_path: Path, entry: str, says: str
) -> None:
    archive = build_zip(tmp_path / "fn.zip", {"fn.py": "x = 1\n", entry: "boom\n"})
    target = tmp_path / "stage" / "out"
    with pytest.raises(UnsafeArchiveError, match="package fn.zip: entry") as refused:
        extract(archive, target, limit=MIB, name="fn.zip")
    assert says in str(refused.value)
    assert refused.value.reason == "unsafe_archive"
    assert not target.exists()  # the checks come before the first write
    assert _files(tmp_path) == ["fn.zip"]
    with pytest.raises(UnsafeArchiveError):
        scan(archive, limit=MIB, name="fn.zip")


def test_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    link = zipfile.ZipInfo("lib")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive = tmp_path / "fn.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(link, "/etc")
        zf.writestr("lib/passwd", "written through the link\n")
    with pytest.raises(UnsafeArchiveError, match="entry 'lib' is a symbolic link"):
        extract(archive, tmp_path / "out", limit=MIB, name="fn.zip")
    assert not (tmp_path / "out").exists()


def test_expansion_is_counted_while_unpacking(tmp_path: Path) -> None:
    # 3 MiB of zeros compress to a few KiB: the upload is small, its content is not.
    archive = build_zip(tmp_path / "bomb.zip", {"a.py": "x = 1\n", "zeros.bin": b"\0" * 3 * MIB})
    assert archive.stat().st_size < 64 * 1024
    with pytest.raises(PackageTooLargeError) as refused:
        extract(archive, tmp_path / "out", limit=MIB, name="bomb.zip")
    assert str(refused.value) == (
        f"package bomb.zip expands past the worker's limit of {MIB} bytes "
        "(max_expanded_bytes), at entry 'zeros.bin'"
    )
    assert refused.value.reason == "package_too_large"
    assert (tmp_path / "out" / "zeros.bin").stat().st_size <= MIB  # stopped at the limit
    with pytest.raises(PackageTooLargeError):
        scan(archive, limit=MIB, name="bomb.zip")


def test_the_headers_sizes_are_not_trusted(tmp_path: Path) -> None:
    # Headers that claim more than the limit do not refuse 10 real bytes...
    claims_more = tmp_path / "claims-more.zip"
    claims_more.write_bytes(_with_sizes(b"x" * 10, declared=50 * MIB))
    assert extract(claims_more, tmp_path / "more", limit=MIB, name="claims-more.zip") == 10
    # ...and headers that claim less do not let 3 MiB through.
    claims_less = tmp_path / "claims-less.zip"
    claims_less.write_bytes(_with_sizes(b"\0" * 3 * MIB, declared=100))
    with pytest.raises(PackageError, match="entry 'data.bin' is corrupt: Bad CRC-32"):
        extract(claims_less, tmp_path / "less", limit=MIB, name="claims-less.zip")
    assert (tmp_path / "less" / "data.bin").stat().st_size <= 100


def test_too_many_entries_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sparkfn.worker.packages.archives.MAX_ENTRIES", 3)
    archive = build_zip(tmp_path / "many.zip", {f"m{i}.py": "" for i in range(4)})
    with pytest.raises(
        PackageTooLargeError, match="package many.zip has 4 entries; the limit is 3"
    ):
        extract(archive, tmp_path / "out", limit=MIB, name="many.zip")


def test_data_that_is_not_a_zip_is_an_invalid_package(tmp_path: Path) -> None:
    fake = tmp_path / "fn.zip"
    fake.write_text("def process(x):\n    return x\n")
    with pytest.raises(PackageError, match="^package fn.zip is not a zip archive$") as refused:
        extract(fake, tmp_path / "out", limit=MIB, name="fn.zip")
    assert refused.value.reason == "invalid_package"


def test_an_entry_given_twice_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "twice.zip"
    with zipfile.ZipFile(archive, "w") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        zf.writestr("fn.py", "x = 1\n")
        zf.writestr("fn.py", "x = 2\n")
    with pytest.raises(PackageError, match="entry 'fn.py' cannot be written: File exists"):
        extract(archive, tmp_path / "out", limit=MIB, name="twice.zip")


def test_entry_parts_drop_empty_and_current_parts() -> None:
    assert entry_parts("./lib//a.py", "fn.zip") == ("lib", "a.py")
    assert entry_parts("lib\\b.py", "fn.zip") == ("lib", "b.py")
    with pytest.raises(UnsafeArchiveError, match="entry './' has no name"):
        entry_parts("./", "fn.zip")
