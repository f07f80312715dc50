"""Log topic tests: logs a line in ``initialize`` and one per message in ``process``."""

from __future__ import annotations

from typing import Any

from sparkfn import Context, Function


class InitializeLogger(Function):
    def initialize(self, context: Context) -> None:
        context.get_logger().info("initialized instance %s", context.get_instance_id())

    def process(self, input: Any, context: Context) -> Any:
        context.get_logger().info("processing %s", input)
        return input
