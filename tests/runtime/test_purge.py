"""Purging a function's records (``runtime/purge.py``) against live worker processes.

A Spark Python worker's control thread remembers the id of the last command
it read, and each of its objects the id of its row. Purging deletes those
rows; had the store handed their ids out again (SQLite reuses ``max(id) + 1``
without AUTOINCREMENT), the commands of a function created again under the
same name would go unseen by every thread that had read past them, and
its objects would never be closed. The worker tests caught it as a 30 s
wait for ``close()`` on SQLite only.
"""

from __future__ import annotations

from pathlib import Path

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle import objects
from sparkfn.runtime.purge import purge_function
from sparkfn.store.store import Store


def test_ids_of_purged_commands_and_objects_are_never_handed_out_again(
    store: Store, tmp_path: Path
) -> None:
    code = tmp_path / "f.py"
    code.write_text("def process(input):\n    return input\n")
    config = FunctionConfig.build(name="again", py=str(code), inputs=["in"], output="out")
    first = [objects.issue_command(store, config.fqfn, "close", [0], 1) for _ in range(3)]
    created = objects.register_object(store, config.fqfn, 0, 1)
    purge_function(store, config)
    later = objects.issue_command(store, config.fqfn, "close", [0], 1)
    assert later > max(first), "a thread that read up to the purged commands must see this one"
    assert [c.id for c in objects.commands_after(store, max(first))] == [later]
    assert objects.register_object(store, config.fqfn, 0, 1) > created
