"""A function written for Apache Pulsar, unchanged.

Run it as it is, with no flag: it imports ``pulsar``, so sparkfn gives it
Pulsar's serde and Context behaviour and resolves ``pulsar`` to a small
shim of its own; this file needs neither Pulsar nor its client. The
Context methods keep their Pulsar names and meaning.
"""

from pulsar import Function


class ExclamationFunction(Function):
    def __init__(self):
        pass

    def process(self, input, context):
        context.incr_counter("seen", 1)
        return input + "!"
