"""The public API is exactly what ``sparkfn.__all__`` lists."""

from __future__ import annotations

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
