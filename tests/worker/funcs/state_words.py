"""A Pulsar function over its state (issue 38, point 9).

``put KEY`` stores the bytes ``b"\\xff\\x00\\xfe" + KEY`` (no UTF-8) under ``KEY``;
``get KEY`` returns ``"KEY <type of get_state's value> <its base64>"``; any
other input counts its words with ``incr_counter`` and returns nothing.
"""

import base64

from pulsar import Function


class StateWords(Function):
    def process(self, input, context):
        verb, _, key = input.partition(" ")
        if verb == "put":
            context.put_state(key, b"\xff\x00\xfe" + key.encode())
            return None
        if verb == "get":
            value = context.get_state(key)
            return f"{key} {type(value).__name__} {base64.b64encode(value).decode()}"
        for word in input.split():
            context.incr_counter(word, 1)
        return None
