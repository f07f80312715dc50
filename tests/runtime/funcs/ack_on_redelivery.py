"""A Pulsar function with autoAck false: it acknowledges a message only on its second delivery.

Its output says which delivery it was and what the Context gave (key, event
time, function id, the state it put), so a test sees the redelivery and
Pulsar's values. A message "never" is never acknowledged.
"""

import json

from pulsar import Function


class AckOnRedelivery(Function):
    def __init__(self):
        self.deliveries = {}

    def process(self, input, context):
        message_id = context.get_message_id()
        seen = self.deliveries.get(str(message_id), 0) + 1
        self.deliveries[str(message_id)] = seen
        context.put_state("s", "v")
        context.incr_counter("calls", 1)  # an unacknowledged call's change is discarded
        if seen >= 2 and input != "never":
            context.ack(message_id, context.get_current_message_topic_name())
        return json.dumps(
            {
                "input": input,
                "delivery": seen,
                "key": context.get_message_key(),
                "partition_key": context.get_partition_key(),
                "eventtime": context.get_message_eventtime(),
                "function_id": context.get_function_id(),
                "state": repr(context.get_state("s")),
            }
        )
