"""Query groups: one Spark streaming query serves many functions (DESIGN.md 2.2).

A worker carries many functions that are each active at a low rate. One
streaming query per function pays Spark's per-batch fixed cost (planning,
the WAL and commit-log writes, a job, a commit) and a source runner process
per function; a group pays them once for all of its members:

* :mod:`.members`: who is in a group, kept in the store (``group_members``),
  each member in its run's current epoch;
* :mod:`.reader`: the group's source (``format("sparkfn-group")``): each
  trigger it reads every member's cursors, control record and input ends in
  a few queries, and plans only the members that have data (or an
  end-of-stream batch to run), each within its row budget;
* :mod:`.task`: a task runs the slices of several members, each member's
  failure caught and kept to that member;
* :mod:`.commit`: one transaction per member, each with the member's own
  epoch and membership check;
* :mod:`.run`: the group's query in the worker, and the
  :class:`~.run.GroupMemberTarget` through which a function's supervisor
  joins and leaves it.
"""
