"""Pulsar's typed_message_builder_publish, rewritten: the same publish, built another way."""

import time

from pulsar import Function


class TypedPublish(Function):
    def __init__(self):
        pass

    def process(self, input, context):
        config = context.get_user_config_map()
        topic = (
            context.get_user_config_value("publish-topic")
            if "publish-topic" in config
            else "copies"
        )
        merged = dict(
            context.get_message_properties(), input_topic=context.get_current_message_topic_name()
        )
        context.publish(
            topic,
            f"{input}!",
            message_conf={
                "properties": merged,
                "partition_key": context.get_partition_key(),
                "event_timestamp": int(time.time() * 1000),
            },
        )
