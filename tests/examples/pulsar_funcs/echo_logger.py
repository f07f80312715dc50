"""Pulsar's logfunction, rewritten: log each input, then exclaim."""

from pulsar import Function


class EchoLogger(Function):
    def process(self, input, context):
        context.get_logger().info(input)
        return input + "!"
