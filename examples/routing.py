"""Content-based routing with ``context.publish``.

Each message names a product. Fruits go to one topic, vegetables to
another, anything else to the output topic; the routing topics come from
``user_config`` so the same code serves any deployment::

    user_config = {"fruit_topic": "fruits", "vegetable_topic": "vegetables"}

Published messages commit together with the input message: if ``process``
raises, nothing it published is kept.
"""

from sparkfn import Context, Function

FRUITS = frozenset({"apple", "banana", "cherry", "orange", "pear"})
VEGETABLES = frozenset({"carrot", "kale", "leek", "onion", "pepper"})


class Router(Function):
    """Sends fruits and vegetables to their topics; returns everything else."""

    def process(self, input: str, context: Context) -> str | None:
        """Publish a known product to its topic (emitting nothing), else pass it on."""
        product = input.strip().lower()
        if product in FRUITS:
            context.publish(context.get_user_config_value("fruit_topic"), product)
            return None
        if product in VEGETABLES:
            context.publish(context.get_user_config_value("vegetable_topic"), product)
            return None
        return product
