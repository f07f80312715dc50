"""A Pulsar function whose database is down while a file exists (issue 38, point 1).

Each delivery appends a JSON line to ``userConfig.log`` saying what the
function was given: the value, Pulsar's topic name, message id, key,
properties, redelivery count and the time. A value starting with ``db``
raises ``ConnectionError`` while the file ``userConfig.down`` exists, and
``poison`` always raises; anything else is returned with what was seen.
"""

import json
import os
import time

from pulsar import Function


class FlakyDb(Function):
    def process(self, input, context):
        seen = {
            "value": input,
            "topic": context.get_current_message_topic_name(),
            "id": str(context.get_message_id()),
            "key": context.get_message_key(),
            "properties": context.get_message_properties(),
            "redeliveries": context.get_message_redelivery_count(),
            "t": time.time(),
        }
        line = (json.dumps(seen) + "\n").encode()
        fd = os.open(context.get_user_config_value("log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        if input == "poison":
            raise ValueError("cannot parse poison")
        if input.startswith("db") and os.path.exists(context.get_user_config_value("down")):
            raise ConnectionError("database is down")
        return json.dumps(seen)
