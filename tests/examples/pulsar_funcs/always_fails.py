"""Pulsar's user_exception, rewritten: every message raises."""

from pulsar import Function


class AlwaysFails(Function):
    def __init__(self):
        pass

    def process(self, input, context):
        raise Exception("not today")
