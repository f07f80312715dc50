"""One lifecycle for functions, sinks and sources.

One room of the runtime, below the queries (:mod:`sparkfn.runtime.query`) and
the groups (:mod:`sparkfn.runtime.group`) that read its records and run under
its supervisor; it imports neither (``tests/test_layers.py`` checks it).

The records every participant shares:

* :mod:`.states`: the run's state machine (:class:`~sparkfn.api.lifecycle.RunState`);
* :mod:`.policy`: :func:`~.policy.decide`, the failure policy as a pure function;
* :mod:`.causes`: the user-facing text of a failure;
* :mod:`.control`: the run's record in the store (runs, deaths, stop requests);
* :mod:`.objects`: commands to Spark's Python workers and the user objects they close;
* :mod:`.workerctl`: the control thread in each Spark Python worker;
* :mod:`.deadletter`: dead-lettering one input message outside any batch.

The supervision:

* :mod:`.supervisor`: :class:`~.supervisor.Supervisor`, which runs one
  :class:`~.target.RunTarget` (a Spark query for a function or a sink,
  the instance threads for a source) under its stop modes and failure policy;
* :mod:`.target`: the :class:`~.target.RunTarget` protocol and what a target
  reports when it ended by itself;
* :mod:`.query_target`: a function's own Spark query as a run target;
* :mod:`.lookout`: when a supervisor reads its run's record;
* :mod:`.parking`, :mod:`.poison` (its pure halving in :mod:`.halving`): parked queries, and the search for a message
  that kills its Python worker;
* :mod:`.function`: the function supervisor, which runs a query of its own or,
  given a :data:`~.function.MemberTarget` by its caller, a member of a query
  group (:mod:`sparkfn.runtime.group`).
"""
