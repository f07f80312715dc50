"""Pulsar's native_exclamation_function, rewritten: no SDK, named by its module alone."""


def process(input):
    return input + "!"
