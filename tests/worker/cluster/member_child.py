"""A child process that is one cluster member and nothing else (no worker, no Spark).

``python member_child.py STORE_URL DATA_DIR WORKER_ID LEASE``: joins, prints
``joined``, then ``leader True|False`` and ``fenced`` as they happen (one line
each, flushed), and stays until killed or its stdin closes.
"""

from __future__ import annotations

import sys

from sparkfn.store.store import Store
from sparkfn.worker.cluster.membership import Membership


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    url, data_dir, worker_id, lease = sys.argv[1:5]
    store = Store.open(url, data_dir)
    member = Membership(
        store, worker_id, host="127.0.0.1", port=0, lease=float(lease),
        on_fenced=lambda: say("fenced"), on_leader=lambda leader: say(f"leader {leader}"),
    )  # fmt: skip
    member.start()
    say("joined")
    sys.stdin.read()  # until the test closes our stdin (or kills us)
    member.close()
    store.close()


if __name__ == "__main__":
    main()
