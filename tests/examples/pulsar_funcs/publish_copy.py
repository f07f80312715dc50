"""Pulsar's publish_function, rewritten: publish to a configured topic, return nothing."""

from pulsar import Function


class PublishCopy(Function):
    def process(self, input, context):
        target = "copies"
        if "publish-topic" in context.get_user_config_map():
            target = context.get_user_config_value("publish-topic")
        context.publish(target, input + "!")
