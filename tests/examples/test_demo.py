"""``make demo``'s job, ``examples/demo.py``, end to end: a worker, the CLI, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


def _processes_under(path: Path) -> list[str]:
    """The command lines of the running processes that name ``path`` (its worker, its JVM)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile, or not ours to read
        if str(path) in command:
            found.append(command)
    return found


@pytest.mark.long_running(70)
def test_the_demo_submits_wordcount_to_a_worker_and_leaves_nothing_behind(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
    env |= {"TMPDIR": str(scratch), "COLUMNS": "200"}  # the demo's directory lands in scratch
    done = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, env=env, timeout=300
    )
    shown = f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
    assert done.returncode == 0, shown
    assert "5 sentences processed once, 20 words counted, every counter right" in done.stdout
    for step in ("worker start", "functions create", "functions status", "functions querystate"):
        assert f"$ sparkfn {step}" in done.stdout, shown
    assert "the = counter 4" in done.stdout, shown
    # Spark's own noise stays in the worker's log file.
    for noise in ("WARN", "log4j", "Traceback", "INFO"):
        assert noise not in done.stdout + done.stderr, shown
    assert list(scratch.iterdir()) == [], "the demo left files behind"
    assert _processes_under(scratch) == [], "the demo left processes behind"
