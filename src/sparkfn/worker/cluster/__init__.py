"""The cluster of workers over one store: membership, the leader, the assignment.

* :mod:`~sparkfn.worker.cluster.membership`: joining, the lease, the leader
  lock and fencing of one worker.
* :mod:`~sparkfn.worker.cluster.leader_lock`: the PostgreSQL advisory lock on a
  session of its own.
* :mod:`~sparkfn.worker.cluster.single`: a SQLite store's one worker.
* :mod:`~sparkfn.worker.cluster.assignment`: which worker runs which instance
  (pure: no store, no Spark).
* :mod:`~sparkfn.worker.cluster.members`: the membership as the REST API reads it.

docs/cluster.md has the protocol, its failure cases and what is not built yet.
"""
