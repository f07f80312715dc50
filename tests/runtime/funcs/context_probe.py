"""A Pulsar function that calls every method of Pulsar's Python Context and reports what it got."""

import json

import pulsar
from pulsar import Function


class ContextProbe(Function):
    def process(self, input, context):
        called_back = []
        message_id = context.get_message_id()
        context.incr_counter("seen", 2)
        context.put_state("last", input)
        context.record_metric("size", len(input))
        context.get_logger().info("probing %s", input)
        context.publish(
            "side",
            7,
            properties={"via": "publish"},
            compression_type=pulsar.CompressionType.LZ4,
            callback=lambda result, sent: self.published(context, result, sent, called_back),
            message_conf={"partition_key": "side-key", "event_timestamp": 1000},
        )
        context.ack(message_id, context.get_current_message_topic_name())
        try:
            context.ack(message_id, "persistent://public/default/not-an-input")
            bad_ack = "accepted"
        except ValueError:
            bad_ack = "ValueError"
        report = {
            "message_id": str(message_id),
            "message_id_parts": [message_id.partition(), message_id.entry_id()],
            "key": context.get_message_key(),
            "eventtime": context.get_message_eventtime(),
            "properties": context.get_message_properties(),
            "topic": context.get_current_message_topic_name(),
            "sequence_id": context.get_message_sequence_id(),
            "partition_index": context.get_message_partition_index(),
            "partition_key": context.get_partition_key(),
            "function": [
                context.get_function_tenant(),
                context.get_function_namespace(),
                context.get_function_name(),
                context.get_function_id(),
            ],
            "version_is_text": isinstance(context.get_function_version(), str),
            "instance_id": context.get_instance_id(),
            "logger": type(context.get_logger()).__name__,
            "config_value": context.get_user_config_value("greeting"),
            "config_missing": context.get_user_config_value("missing"),
            "config_map": dict(context.get_user_config_map()),
            "secret": context.get_secret("token"),
            "secret_missing": context.get_secret("missing"),
            "input_topics": context.get_input_topics(),
            "output_topic": context.get_output_topic(),
            "output_serde": context.get_output_serde_class_name(),
            "counter": context.get_counter("seen"),
            "state": context.get_state("last"),
            "bad_ack": bad_ack,
            "callbacks_before_success": called_back,
        }
        context.del_counter("seen")
        report["counter_after_delete"] = context.get_counter("seen")
        return json.dumps(report, default=lambda b: b.decode())

    def published(self, context, result, sent, called_back):
        called_back.append(result)
        ok = result == pulsar.Result.Ok
        context.get_logger().info("published: ok=%s id=%s", ok, sent)
