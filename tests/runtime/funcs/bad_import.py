"""Bad-code test: a module whose import fails."""

import sparkfn_no_such_module  # noqa: F401


def process(input):
    return input
