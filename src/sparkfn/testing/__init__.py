"""Unit-test a function without Spark.

>>> from sparkfn.testing import FunctionHarness
>>> harness = FunctionHarness(lambda text: text.upper())
>>> harness.send("shout")
['SHOUT']

The harness runs sparkfn's own per-message engine, so retries, dead letters
and state behave as in a real run; see :class:`FunctionHarness`.
"""

from sparkfn.api.errors import HarnessClosedError
from sparkfn.testing.harness import FunctionHarness, HarnessState
from sparkfn.testing.topics import ProducedMessage, TopicMessages

__all__ = [
    "FunctionHarness",
    "HarnessClosedError",
    "HarnessState",
    "ProducedMessage",
    "TopicMessages",
]
