"""Message-error tests: fails on every input starting with ``bad``.

Before failing it does everything a message can leave behind (an output is
only the return value, so: a counter, a state value, a publish) so the test
can prove a failed attempt leaves no trace. State changes of a failed attempt
are discarded by design, so attempts are counted outside sparkfn: one line
per attempt appended to ``user_config["attempts_file"]``.
"""

from __future__ import annotations

from typing import Any

from sparkfn import Context, Function


class Flaky(Function):
    def process(self, input: Any, context: Context) -> Any:
        context.incr_counter("seen", 1)
        context.put_state(f"last/{context.get_message_key()}", input)
        context.publish("side", f"side {input}")
        if input.startswith("bad"):
            with open(context.get_user_config_value("attempts_file"), "a") as attempts:
                attempts.write(f"{context.get_message_id()}\n")
            msg = f"cannot handle {input}"
            raise ValueError(msg)
        return input.upper()
