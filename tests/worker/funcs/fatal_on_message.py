"""A function that cannot go on: every message ends its instance with context.fatal."""


def process(input, context):
    context.fatal(RuntimeError(f"cannot go on after {input!r}"))
