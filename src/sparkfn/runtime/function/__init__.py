"""One function instance inside a Spark Python worker process.

The per-message engine that the Spark runtime (:mod:`sparkfn.runtime.query.executor`)
and the unit-test harness (:mod:`sparkfn.testing`) both drive, in modules
along its concepts:

* :mod:`.instance`   -- :class:`~.instance.FunctionInstance`: the user object,
  its lifecycle state (:class:`~.instance.InstanceState`), a task's
  messages and their dead letters;
* :mod:`.attempts`   -- the attempts of each message, written once: retries,
  the rollback of a failed attempt, stats;
* :mod:`.context`    -- :class:`~.context.FunctionContext`, the
  :class:`~sparkfn.api.context.Context` a function is given;
* :mod:`.emit`       -- :class:`~.emit.EmitBuffer`, the messages a task
  produced for topics, as Arrow columns;
* :mod:`.rows`       -- :class:`~.rows.InputRows`, a task's input as
  Python lists, and the dead-letter message of a row;
* :mod:`.topics`     -- :class:`~.topics.TopicCatalog`, the topics a
  function publishes to (and creates, when allowed);
* :mod:`.vectorized` -- the batch a vectorized function sees and the
  encoding of what it returns;
* :mod:`.secrets`    -- ``get_secret``'s resolution of secret specs.
"""
