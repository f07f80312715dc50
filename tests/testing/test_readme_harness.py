"""The README's ``FunctionHarness`` snippet works as written, run from the repository root."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparkfn.api.errors import ConfigError
from sparkfn.testing import FunctionHarness

ROOT = Path(__file__).resolve().parents[2]
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _readme_snippet() -> str:
    blocks = [b for b in _PYTHON_BLOCK.findall((ROOT / "README.md").read_text()) if "Harness(" in b]
    assert len(blocks) == 1, blocks
    return str(blocks[0])


def test_the_readme_snippet_runs_from_the_repository_root_as_written() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run(
        [sys.executable, "-c", _readme_snippet()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr


def test_a_path_is_loaded_with_its_classname_or_its_process() -> None:
    counted = FunctionHarness(ROOT / "examples" / "wordcount.py", classname="wordcount.WordCount")
    counted.send("a b a")
    assert counted.counters == {"a": 2, "b": 1}
    assert FunctionHarness(str(ROOT / "examples" / "exclamation.py")).send("hi") == ["hi!"]
    with pytest.raises(ConfigError, match="classname goes with the path of a .py file"):
        FunctionHarness(lambda text: text, classname="x")
