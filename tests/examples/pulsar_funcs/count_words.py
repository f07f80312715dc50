"""Pulsar's wordcount_function, rewritten: count words in state, log each count."""

from pulsar import Function


class CountWords(Function):
    def process(self, input, context):
        for word in input.split():
            context.incr_counter(word, 1)
            count = context.get_counter(word)
            context.get_logger().info("%s seen %d times", word, count)
        return input + "!"
