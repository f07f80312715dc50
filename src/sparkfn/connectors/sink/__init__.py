"""Running sinks: a sink is run as a function.

:mod:`~sparkfn.connectors.sink.sink_config` turns a sink's config into a
function config, :mod:`~sparkfn.connectors.sink.sink_run` runs it. The
adapter the function config names stays in
:mod:`sparkfn.connectors.sink_runtime`: its dotted path is stored with every
sink's config, so it must not move.
"""
