"""Pulsar's secrets_function, rewritten: output the configured secret."""

from pulsar import Function


class GreetSecret(Function):
    def process(self, input, context):
        return f"{context.get_secret('username')}!"
