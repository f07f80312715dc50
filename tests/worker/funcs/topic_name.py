"""A Pulsar function that returns its input with the topic Pulsar names the message by."""

from pulsar import Function


class TopicName(Function):
    def process(self, input, context):
        return f"{input}|{context.get_current_message_topic_name()}"
