"""The public API is exactly what ``sparkfn.__all__`` lists, and holds every name the docs use."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import sparkfn


def test_all_is_sorted_and_complete() -> None:
    assert sparkfn.__all__ == sorted(sparkfn.__all__)
    public = {
        name
        for name in dir(sparkfn)
        if not name.startswith("_")
        and name not in {"annotations", "importlib", "Any", "TYPE_CHECKING"}
        and not getattr(getattr(sparkfn, name), "__name__", "").startswith("sparkfn.")
    }
    assert public == set(sparkfn.__all__)


def test_everything_listed_is_importable() -> None:
    for name in sparkfn.__all__:
        assert getattr(sparkfn, name) is not None, name


def test_import_does_not_load_pyspark() -> None:
    """The topics CLI imports sparkfn; pyspark must load only when Spark is used."""
    import subprocess
    import sys

    code = "import sys, sparkfn; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- what the docs use --------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Subpackages with an API of their own; everything else is reached through ``sparkfn``.
PUBLIC_SUBPACKAGES = {"sparkfn.testing", "sparkfn.connectors"}
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)^[ \t]*\1", re.MULTILINE | re.DOTALL)
_FROM_IMPORT = re.compile(r"\bfrom\s+(sparkfn(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n#]+)")
_ATTRIBUTE = re.compile(r"(?<![\w.])sparkfn((?:\.\w+)+)")


def _code_blocks(path: Path) -> list[str]:
    return [match.group(2) for match in _FENCE.finditer(path.read_text())]


def _usages(block: str) -> list[tuple[str, str]]:
    """``(module, name)`` for each ``from sparkfn... import name`` and ``sparkfn.name`` in ``block``."""
    found = [
        (module, name.split(" as ")[0].strip())
        for module, names in _FROM_IMPORT.findall(block)
        for name in names.strip("()").split(",")
        if name.strip()
    ]
    for chain in _ATTRIBUTE.findall(_FROM_IMPORT.sub("", block)):
        first, *rest = chain.strip(".").split(".")
        if importlib.util.find_spec(f"sparkfn.{first}") is None:
            found.append(("sparkfn", first))
        elif rest:
            found.append((f"sparkfn.{first}", rest[0]))
    return found


def _doc_usages() -> list[tuple[str, str, str]]:
    """``(document, module, name)`` for every sparkfn name a docs code block uses."""
    return [
        (str(path.relative_to(ROOT)), module, name)
        for path in DOCS
        for block in _code_blocks(path)
        for module, name in _usages(block)
    ]


def test_the_docs_scan_finds_imports_and_attributes() -> None:
    block = (
        "from sparkfn import (\n    A,\n    B as b,\n)\nfrom sparkfn.testing import H\n"
        "x = sparkfn.C.d\ny = sparkfn.testing.K()  # and sparkfn.api is a module\n"
    )
    assert _usages(block) == [
        ("sparkfn", "A"),
        ("sparkfn", "B"),
        ("sparkfn.testing", "H"),
        ("sparkfn", "C"),
        ("sparkfn.testing", "K"),
    ]
    assert len(_code_blocks(ROOT / "README.md")) > 3


def test_every_name_the_docs_use_is_public() -> None:
    usages = _doc_usages()
    assert {name for _, module, name in usages if module == "sparkfn"} >= {
        "Function",
        "FunctionRun",
    }
    problems = []
    for where, module, name in usages:
        if module != "sparkfn" and module not in PUBLIC_SUBPACKAGES:
            problems.append(f"{where}: imports {name} from {module}; use 'from sparkfn import'")
        elif not hasattr(importlib.import_module(module), name):
            problems.append(f"{where}: {module} has no {name}")
        elif module == "sparkfn" and name not in sparkfn.__all__:
            problems.append(f"{where}: sparkfn.{name} is not in sparkfn.__all__")
    assert problems == []
