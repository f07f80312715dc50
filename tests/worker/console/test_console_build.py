"""The committed console build is what its sources make, with the versions package-lock.json pins.

The worker serves ``src/sparkfn/worker/console_dist`` (committed, so that a
worker needs no Node.js); this rebuilds ``console/`` into a scratch directory
with the packages ``make install`` installed (``npm ci``) and compares every
file. After a change to ``console/src``, ``make console`` rebuilds it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CONSOLE = ROOT / "console"
DIST = ROOT / "src" / "sparkfn" / "worker" / "console_dist"


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_the_committed_build_matches_the_sources(tmp_path: Path) -> None:
    vite = CONSOLE / "node_modules" / ".bin" / "vite"
    node = shutil.which("node")
    if node is None or not vite.exists():
        why = "Node.js or the console's npm packages are missing (make install runs npm ci)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{why}; CI=true: the build check must run", pytrace=False)
        pytest.skip(why)
    out = tmp_path / "dist"
    built = subprocess.run(
        [str(vite), "build", "--outDir", str(out), "--emptyOutDir", "--logLevel", "error"],
        cwd=CONSOLE,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    made, committed = _files(out), _files(DIST)
    assert sorted(made) == sorted(committed), "run `make console` and commit the build"
    changed = [name for name in made if made[name] != committed[name]]
    assert not changed, f"{changed} differ from the sources' build: run `make console` and commit"
