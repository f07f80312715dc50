"""Deleting a function through the worker leaves no file of it in the data directory."""

from __future__ import annotations

from pathlib import Path

import httpx

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.build import checkpoint_dir
from sparkfn.store import signals
from sparkfn.worker.service import Worker


def test_a_deleted_functions_checkpoint_leftovers_and_commit_hint_are_gone(
    worker: Worker, client: httpx.Client, data_dir: Path
) -> None:
    config = FunctionConfig.build(name="gone", py="examples/exclamation.py", inputs=["in"])
    worker.registry.create(config, package_digest=None, who="alice")
    # What a run leaves: its checkpoint, with the temp file of a write a kill cut
    # short (Spark writes `.<batch>.<uuid>.tmp`, then renames it), and its
    # lifecycle record's commit hint.
    checkpoint = checkpoint_dir(worker.open_store(), config)
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("v1\n")
    (checkpoint / "offsets" / ".1.0b5c1e8e-3c1f-4b7e-9d0a-6f1e2d3c4b5a.tmp").write_text("v1\n")
    signals.touch(data_dir, signals.control_hint(control.control_id("function", config.fqfn)))
    hints_before = set((data_dir / signals.HINTS_DIR).iterdir())

    deleted = client.delete("/admin/v3/functions/public/default/gone")
    assert deleted.status_code == 200, deleted.text

    assert not (data_dir / "functions").exists(), sorted((data_dir / "functions").rglob("*"))
    left = set((data_dir / signals.HINTS_DIR).iterdir())
    assert [p.name for p in hints_before - left] == ["control-public_default_gone"]
    assert not any("gone" in p.name for p in left)
