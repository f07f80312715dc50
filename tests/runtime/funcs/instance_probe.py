"""Parallelism tests: tag every output with the instance and message it came from.

The output is ``<key>|<message id>|<instance id>|<input>``. In per-key /
per-partition state the function records the last sequence number
(``key_shared``) or offset (``failover``) it saw, and counts every message
that arrives out of order in the counter ``out_of_order``.
"""

from __future__ import annotations

from typing import Any

from sparkfn import Context, Function


class InstanceProbe(Function):
    def process(self, input: Any, context: Context) -> Any:
        key = context.get_message_key()
        message_id = context.get_message_id()
        partition, offset = message_id.partition(), message_id.entry_id()
        instance = context.get_instance_id()
        mode = context.get_user_config_value("order_by")
        if mode == "key":
            slot, position = f"last/key/{key}", int(input.rsplit(":", 1)[1])
        else:
            slot, position = f"last/partition/{partition}", offset
        last = context.get_state(slot)
        if last is not None and int(last) >= position:
            context.incr_counter("out_of_order", 1)
        context.put_state(slot, str(position))
        context.incr_counter(f"seen-by/{instance}", 1)
        return f"{key}|{message_id}|{instance}|{input}"
