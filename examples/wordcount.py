"""Word count: the function of the README.

Each word of each sentence increments a counter in the function's state;
the sentence itself goes on to the output topic. Counters are committed
with the batch that produced them, so each sentence counts exactly once
under ``effectively_once``. Read them back with
``sparkfn functions querystate --name wordcount --key apple``.
"""

from sparkfn import Context, Function


class WordCount(Function):
    """Counts the words of every sentence; passes the sentence through."""

    def process(self, input: str, context: Context) -> str:
        """Increment one counter per word; return the sentence unchanged."""
        for word in input.split():
            context.incr_counter(word, 1)
        return input
