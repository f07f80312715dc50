"""A Pulsar function with autoAck false that acknowledges a message on its second delivery
(issue 38, point 2); ``never`` is never acknowledged.

Each delivery appends ``{"input", "delivery", "t"}`` to ``userConfig.log`` (the delivery
counted from that file, so a count survives the function's object being made again) and
returns the same line: every call's output is published, acknowledged or not.
"""

import json
import os
import time

from pulsar import Function


class AckSecond(Function):
    def process(self, input, context):
        log = context.get_user_config_value("log")
        seen = 1
        if os.path.exists(log):
            with open(log) as lines:
                seen += sum(1 for line in lines if json.loads(line)["input"] == input)
        line = json.dumps({"input": input, "delivery": seen, "t": time.time()})
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
        if seen >= 2 and input != "never":
            context.ack(context.get_message_id(), context.get_current_message_topic_name())
        return line
