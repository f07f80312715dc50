"""Pulsar's exclamation.py, rewritten: the shortest class-based function."""

from pulsar import Function


class Exclaim(Function):
    def process(self, input, context):
        return input + "!"
