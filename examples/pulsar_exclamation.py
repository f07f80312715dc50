"""A function written for Apache Pulsar, unchanged.

Run it with Pulsar compatibility (``pulsar_compat=True``, or
``--pulsar-compat`` on the CLI): sparkfn then resolves ``pulsar`` to a small
shim of its own, so this file needs neither Pulsar nor its client. The
Context methods keep their Pulsar names and meaning.
"""

from pulsar import Function


class ExclamationFunction(Function):
    def __init__(self):
        pass

    def process(self, input, context):
        context.incr_counter("seen", 1)
        return input + "!"
