"""Pulsar's publish_function_with_message_conf, rewritten: publish with key, properties, time."""

import time

from pulsar import Function


class PublishWithConf(Function):
    def process(self, input, context):
        target = "copies"
        if "publish-topic" in context.get_user_config_map():
            target = context.get_user_config_value("publish-topic")
        properties = {"input_topic": context.get_current_message_topic_name()}
        properties.update(context.get_message_properties())
        conf = {
            "properties": properties,
            "partition_key": context.get_partition_key(),
            "event_timestamp": int(time.time()),
        }
        context.publish(target, input + "!", message_conf=conf)
