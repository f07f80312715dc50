"""The worker's REST API: the FastAPI app, its routes and their JSON bodies.

The top room of the worker: it turns HTTP requests into calls of the
:class:`~sparkfn.worker.service.Worker` and the package store, and nothing
below imports it. :mod:`~sparkfn.worker.api.app` assembles the app; each
``*_api`` module holds one group of routes (functions, connectors, topics,
packages, logs, operations, the cluster), :mod:`~sparkfn.worker.api.params`
the checked parameter types they take, :mod:`~sparkfn.worker.api.console`
the web console's page and listings.
"""
