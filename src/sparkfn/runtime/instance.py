"""Moved to :mod:`sparkfn.runtime.function`; these names remain for two importers.

``runtime/workerctl.py`` and ``connectors/runner.py`` still import from here;
this module goes when they import from :mod:`sparkfn.runtime.function`.
"""

from sparkfn.runtime.function.emit import Emitted
from sparkfn.runtime.function.instance import FunctionInstance
from sparkfn.runtime.function.secrets import resolve_secret

__all__ = ["Emitted", "FunctionInstance", "resolve_secret"]
