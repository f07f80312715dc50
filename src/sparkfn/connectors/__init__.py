"""Running sources, and the built-in sources and sinks.

>>> from sparkfn.connectors import SourceInstances
>>> group = SourceInstances(SourceConfig(name="gen", source_type="generator",
...                                      output="demo", configs={"count": 100}), store)
>>> group.start(); group.wait(30)            # a bounded generator ends by itself
True

* :class:`SourceRunner` runs one source instance on a thread of its own, with
  the lifecycle of DESIGN.md 2.3 (``close()`` exactly once, last);
  :class:`SourceInstances` runs ``parallelism`` of them, and
  :class:`SourceRun` runs those under the source's failure policy.
* :func:`load_source` / :func:`load_sink` build a connector object from its
  config: a built-in (:data:`SOURCES`, :data:`SINKS`) or the user's code.

Sinks run inside Spark; sparkfn's sink runtime calls them.
"""

from sparkfn.connectors.registry import SINKS, SOURCES, load_sink, load_source
from sparkfn.connectors.source.instances import SourceInstances
from sparkfn.connectors.source.runner import (
    FINAL_STATES,
    SourceRunner,
    SourceState,
    SourceStats,
    StopMode,
)
from sparkfn.connectors.source.source_run import SourceRun

__all__ = [
    "FINAL_STATES",
    "SINKS",
    "SOURCES",
    "SourceInstances",
    "SourceRun",
    "SourceRunner",
    "SourceState",
    "SourceStats",
    "StopMode",
    "load_sink",
    "load_source",
]
