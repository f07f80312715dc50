"""Running sources: one thread per instance, the instances of a source, its run, and the worker's hosting of it.

Lower first: :mod:`~sparkfn.connectors.source.runner_thread` (the thread that
calls the source), :mod:`~sparkfn.connectors.source.source_context` and
:mod:`~sparkfn.connectors.source.runner` (one instance),
:mod:`~sparkfn.connectors.source.instances` (``parallelism`` of them),
:mod:`~sparkfn.connectors.source.source_run` (under the failure policy) and
:mod:`~sparkfn.connectors.source.hosted_source` (as the worker drives a run).
"""
