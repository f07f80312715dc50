"""Publish tests: publishes each input to ``user_config["publish_to"]``.

``user_config["serde"]``, when set, is passed as ``serde_class_name``: a named
serde encodes the value itself, without the topic's schema, so both paths of
``publish`` are exercised.
"""

from __future__ import annotations

from typing import Any

from sparkfn import Context, Function, SerDe


class Utf8(SerDe):
    def serialize(self, value: Any) -> bytes:
        return str(value).encode()

    def deserialize(self, data: bytes) -> Any:
        return data.decode()


class PublishAnywhere(Function):
    def process(self, input: Any, context: Context) -> Any:
        topic = context.get_user_config_value("publish_to")
        serde = context.get_user_config_value("serde")
        context.publish(topic, input, serde)
        return input
