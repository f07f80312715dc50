"""One lifecycle for functions, sinks and sources (DESIGN.md 2.3).

* :mod:`.states`: the run's state machine (:class:`~sparkfn.api.lifecycle.RunState`);
* :mod:`.policy`: :func:`~.policy.decide`, the failure policy as a pure function;
* :mod:`.supervisor`: :class:`~.supervisor.Supervisor`, which runs one
  :class:`~.target.RunTarget` (a Spark query for a function or a sink,
  the instance threads for a source) under its stop modes and failure policy;
* :mod:`.lookout`: when a supervisor reads its run's record (commit hints,
  wake-ups, the recheck interval);
* :mod:`.target`: the :class:`~.target.RunTarget` protocol and what a target
  reports when it ended by itself;
* :mod:`.query`: the Spark query as a run target;
* :mod:`.causes`: the user-facing text of a failure.

The records every participant shares live in :mod:`sparkfn.runtime.control`;
the control thread in Spark's Python workers in :mod:`sparkfn.runtime.workerctl`.
"""
