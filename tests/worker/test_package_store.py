"""The package store on both store backends: kinds, layout, paths, and refusals that leave nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from wheels import REPORT, build_wheel, build_zip, tinylib

from sparkfn.api.errors import PackageError, PackageNotFoundError, SparkfnError
from sparkfn.runtime.spark.isolation import MANIFEST
from sparkfn.store import registry_schema
from sparkfn.store.store import Store
from sparkfn.worker.packages.store import PackageStore

MIB = 1024 * 1024


@pytest.fixture
def packages(store: Store, tmp_path: Path) -> PackageStore:
    """A package store with small limits that never asks an index."""
    return PackageStore(
        store,
        tmp_path / "packages",
        max_upload_bytes=MIB,
        max_expanded_bytes=2 * MIB,
        index_url="none",
    )


def _save(packages: PackageStore, file: Path, **more: str) -> object:
    with file.open("rb") as stream:
        return packages.save(stream, file.name, who="alice", **more)


def _rows(store: Store) -> tuple[int, int]:
    with store.read() as conn:
        count = conn.execute(
            select(func.count()).select_from(registry_schema.packages)
        ).scalar_one()
        named = conn.execute(
            select(func.count()).select_from(registry_schema.package_paths)
        ).scalar_one()
    return count, named


def test_a_zip_gets_its_requirements_installed_into_its_own_directory(
    packages: PackageStore, store: Store, tmp_path: Path
) -> None:
    wheel = tinylib(tmp_path / "wheels", "1.0")
    archive = build_zip(
        tmp_path / "report.zip",
        {"report.py": REPORT, "requirements.txt": "tinylib==1.0\n", f"deps/{wheel.name}": wheel},
    )
    with archive.open("rb") as stream:
        package = packages.save(stream, "report.zip", who="alice", path="team/report.zip")
    assert (package.kind, package.filename, package.uploaded_by) == ("zip", "report.zip", "alice")
    assert package.size_bytes == archive.stat().st_size
    home = packages.root / package.digest.removeprefix("sha256:")
    assert package.entry == home and package.path == home / "report.zip"
    manifest = json.loads((home / MANIFEST).read_text())
    assert manifest == {"kind": "zip", "paths": ["files", "site"]}
    assert (home / "site" / "tinylib" / "__init__.py").read_text() == "VERSION = '1.0'\n"
    assert (home / "files" / "report.py").read_text() == REPORT

    # The same bytes again under a second path: one package, two names.
    with archive.open("rb") as stream:
        again = packages.save(stream, "other-name.zip", who="bob", path="team/copy.zip")
    assert again == package
    assert packages.resolve("team/report.zip") == packages.resolve(package.digest) == package
    assert packages.paths() == {package.digest: ["team/copy.zip", "team/report.zip"]}
    assert [p.digest for p in packages.list()] == [package.digest]
    assert _rows(store) == (1, 2)
    assert sorted(p.name for p in packages.root.iterdir()) == [home.name]  # no staging left


def test_pulsars_zip_layout_and_a_wheel(packages: PackageStore, tmp_path: Path) -> None:
    wheel = tinylib(tmp_path / "wheels", "2.0")
    pulsar = build_zip(
        tmp_path / "report.zip",
        {"report/src/report.py": REPORT, f"report/deps/{wheel.name}": wheel},
    )
    package = _save(packages, pulsar)
    home = package.entry  # type: ignore[attr-defined]
    assert json.loads((home / MANIFEST).read_text())["paths"] == ["files/report/src", "site"]
    assert (home / "site" / "tinylib").is_dir()

    shout = build_wheel(
        tmp_path / "fn", "shout", "0.1", {"shout.py": "def process(v):\n    return v.upper()\n"}
    )
    package = _save(packages, shout)
    home = package.entry  # type: ignore[attr-defined]
    assert package.kind == "whl"  # type: ignore[attr-defined]
    assert json.loads((home / MANIFEST).read_text())["paths"] == ["site"]
    assert (home / "site" / "shout.py").is_file()


@pytest.mark.parametrize(
    ("entries", "reason", "says"),
    [
        (
            {"report.py": REPORT, "../evil.py": "x"},
            "unsafe_archive",
            "entry '../evil.py' climbs out",
        ),
        ({"report.py": REPORT, "zeros.bin": b"\0" * 3 * MIB}, "package_too_large", "expands past"),
        (
            {"report.py": REPORT, "requirements.txt": "tinylib==9.9\n"},
            "invalid_package",
            "its dependencies could not be installed (pip install -r",
        ),
    ],
    ids=["zip-slip", "expands-too-far", "unresolvable-requirement"],
)
def test_a_refused_package_leaves_nothing(
    packages: PackageStore,
    store: Store,
    tmp_path: Path,
    entries: dict[str, str | bytes],
    reason: str,
    says: str,
) -> None:
    archive = build_zip(tmp_path / "report.zip", entries)
    with pytest.raises(SparkfnError) as refused:
        _save(packages, archive, path="team/report.zip")
    assert refused.value.reason == reason
    assert str(refused.value).startswith("package report.zip")
    assert says in str(refused.value)
    assert list(packages.root.iterdir()) == []
    assert _rows(store) == (0, 0)


def test_uploads_past_the_limit_not_zips_and_unknown_kinds_are_refused(
    packages: PackageStore, store: Store
) -> None:
    cases = [
        (
            "big.py",
            b"#" * (MIB + 1),
            "package_too_large",
            f"limit of {MIB} bytes (max_upload_bytes)",
        ),
        ("fn.zip", b"def process(x):\n    return x\n", "invalid_package", "is not a zip archive"),
        ("fn.whl", b"not a wheel", "invalid_package", "is not a zip archive"),
        ("fn.tar.gz", b"\x1f\x8b", "invalid_package", "unknown kind .gz"),
        ("empty.py", b"", "invalid_package", "package empty.py is empty"),
    ]
    for filename, content, reason, says in cases:
        with pytest.raises(PackageError) as refused:
            packages.save(io.BytesIO(content), filename, who="alice", path="team/x")
        assert (refused.value.reason, says in str(refused.value)) == (reason, True), refused.value
        assert list(packages.root.iterdir()) == [], filename
    assert _rows(store) == (0, 0)
    with pytest.raises(
        PackageNotFoundError, match="no package was uploaded under the path 'team/x'"
    ):
        packages.resolve("team/x")
    with pytest.raises(PackageError, match="upload path 'sha256:abc' is not usable"):
        packages.save(io.BytesIO(b"x = 1\n"), "fn.py", who="alice", path="sha256:abc")
