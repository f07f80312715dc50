"""Pulsar's avro_schema_test_function, rewritten: a schema Record in, the same Record out.

The input topic is an avro topic of ``Reading``'s schema; the function names
``bump_reading.Reading`` as its input serde to receive records of it.
"""

from pulsar import Function
from pulsar.schema import *  # noqa: F403 - the star import Pulsar's example uses


class Reading(Record):  # noqa: F405
    baseValue = Integer()  # noqa: F405
    objectValue = String()  # noqa: F405


class BumpReading(Function):
    def __init__(self):
        pass

    def process(self, input, context):
        input.baseValue = input.baseValue + 10
        return input
