"""The built-in connectors, named by ``source_type`` / ``sink_type``.

Sources (run by :class:`~sparkfn.connectors.source.runner.SourceRunner`):
``file`` (:mod:`.file_source`; it reads with :mod:`.file_reader` and keeps
its progress with :mod:`.file_progress`) and ``generator`` (:mod:`.generator`).
Sinks (run on Spark executors): ``file`` (:mod:`.file_sink`), ``postgres``
(:mod:`.postgres_sink`) and ``stdout`` (:mod:`.stdout_sink`). Each module's
docstring lists its configs.
"""
