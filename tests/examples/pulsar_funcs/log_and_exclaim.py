"""Pulsar's logging_function, rewritten: what it logs goes to the log topic."""

from pulsar import Function


class LogAndExclaim(Function):
    def process(self, input, context):
        logger = context.get_logger()
        logger.info(f"{input}-log")
        return f"{input}!"
