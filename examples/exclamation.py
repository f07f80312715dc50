"""The simplest function: no SDK, one argument."""


def process(input):
    return input + "!"
