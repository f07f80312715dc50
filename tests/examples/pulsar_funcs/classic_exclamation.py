"""Pulsar's exclamation_function, rewritten: the classic exclamation, as a class."""

from pulsar import Function


class ClassicExclamation(Function):
    def __init__(self):
        self.mark = "!"

    def process(self, input, context):
        return input + self.mark
