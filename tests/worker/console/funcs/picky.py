"""A function that refuses some messages: a value starting with 'bad' raises, the rest goes on."""


def process(input, context):
    if input.startswith("bad"):
        raise ValueError(f"cannot take {input!r}")
    return input.upper()
