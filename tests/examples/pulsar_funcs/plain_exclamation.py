"""Pulsar's pure_python_function_exclamation, rewritten: a plain process(input)."""


def process(input):
    shouted = input + "!"
    return shouted
