"""The worker: one process that hosts submitted functions, sources and sinks over one SparkSession.

Its rooms, lower first (``tests/test_layers.py`` holds them to it):
``cluster/`` (membership, the leader, the assignment); ``http`` (the error
bodies every HTTP layer answers with); ``auth/`` (tokens, route access,
request origins); the service (:class:`~sparkfn.worker.service.Worker` with
its runs, their placement, preparing and versions, the registry, settings,
session and recovery); ``packages/`` (uploaded code by digest); and ``api/``
(the REST app and its routes) on top.
"""
