"""Two functions' packages in one process: each function imports its own library version.

Spark's Python workers and the worker's driver are such processes; this is
the mechanism alone, without Spark (tests/worker/test_packages.py runs it
in Spark's workers).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkfn.api.errors import FunctionLoadError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.loader import load_function
from sparkfn.runtime.spark.isolation import MANIFEST, package_paths, use_package

# The same module name in both packages, importing the same library name.
REPORT = """\
import tinylib


def process(value):
    import tinylib as now
    return f"{value}:{tinylib.VERSION}:{now.VERSION}"
"""


def _package(root: Path, version: str, *, manifest: bool) -> Path:
    code, site = (root / "files", root / "site") if manifest else (root, root)
    (site / "tinylib").mkdir(parents=True)
    (site / "tinylib" / "__init__.py").write_text(f"VERSION = {version!r}\n")
    code.mkdir(exist_ok=True)
    (code / "report.py").write_text(REPORT)
    if manifest:
        (root / MANIFEST).write_text(json.dumps({"kind": "zip", "paths": ["files", "site"]}))
    return root


@pytest.fixture
def packages(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Package A (tinylib 1.0, laid out as a worker does) and B (2.0, a plain directory)."""
    yield (
        _package(tmp_path / "a", "1.0", manifest=True),
        _package(tmp_path / "b", "2.0", manifest=False),
    )
    use_package(None)  # leave no package entered for the tests after this one
    assert "tinylib" not in sys.modules and "report" not in sys.modules


def _config(name: str, package: Path) -> FunctionConfig:
    return FunctionConfig(name=name, inputs=["in"], py=str(package), classname="report.process")


def test_each_function_imports_its_own_package(packages: tuple[Path, Path]) -> None:
    a, b = packages
    assert package_paths(str(a)) == (str(a / "files"), str(a / "site"))
    assert package_paths(str(b)) == (str(b),)

    first = load_function(_config("first", a))
    assert first.call("m") == "m:1.0:1.0"
    assert sys.modules["tinylib"].__file__ == str(a / "site" / "tinylib" / "__init__.py")

    second = load_function(_config("second", b))
    assert second.call("m") == "m:2.0:2.0"
    assert sys.modules["report"].__file__ == str(b / "report.py")
    assert sys.path[0] == str(b) and str(a / "site") not in sys.path

    # The first function keeps the module it imported; a later import finds
    # the package entered last, which is why a task enters its package first.
    assert first.call("m") == "m:1.0:2.0"
    use_package(str(a))
    assert first.call("m") == "m:1.0:1.0"
    assert second.call("m") == "m:2.0:1.0"
    use_package(str(b))
    assert second.call("m") == "m:2.0:2.0"


def test_a_function_without_a_package_sees_none(packages: tuple[Path, Path]) -> None:
    a, _ = packages
    load_function(_config("first", a))
    assert "tinylib" in sys.modules
    use_package(None)  # what a .py function's load and tasks do
    assert "tinylib" not in sys.modules
    assert not any(p.startswith(str(a)) for p in sys.path)


def test_a_package_needs_a_classname(packages: tuple[Path, Path]) -> None:
    a, _ = packages
    config = FunctionConfig(name="bare", inputs=["in"], py=str(a))
    with pytest.raises(FunctionLoadError, match="is a package; classname must name its code"):
        load_function(config)
