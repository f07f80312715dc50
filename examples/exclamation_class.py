"""The exclamation function as a :class:`sparkfn.Function` subclass.

The class form receives a :class:`sparkfn.Context` with every call and may
keep per-instance setup in ``initialize``. Run it with::

    sparkfn functions localrun --py examples/exclamation_class.py \
        --classname exclamation_class.Exclamation --inputs in --output out
"""

from sparkfn import Context, Function


class Exclamation(Function):
    """Appends a suffix (``user_config`` ``suffix``, default ``"!"``) to each message."""

    def initialize(self, context: Context) -> None:
        """Read the configuration once, before the first message."""
        self.suffix = context.get_user_config_value("suffix") or "!"

    def process(self, input: str, context: Context) -> str:
        """Return the message with the suffix appended."""
        return input + self.suffix
