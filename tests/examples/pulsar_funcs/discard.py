"""Pulsar's void_function, rewritten: returns nothing, so nothing is output."""

from pulsar import Function


class Discard(Function):
    def process(self, input, context):
        return
