"""A JSON transformation: dicts in, dicts out.

On a topic of schema type ``json`` the function receives the parsed value
(a dict here) and its result is serialised back to JSON for a ``json``
output topic. An order becomes a summary with its total; an order without
items is logged and skipped (returning ``None`` emits nothing).
"""

from typing import Any

from sparkfn import Context, Function


class OrderTotal(Function):
    """Turns an order ``{"id", "items": [{"price", "qty"}]}`` into ``{"id", "total", "items"}``."""

    def process(self, input: dict[str, Any], context: Context) -> dict[str, Any] | None:
        """Summarise one order; skip (and log) an order without items."""
        items = input.get("items") or []
        if not items:
            context.get_logger().warning("order %s has no items; skipped", input.get("id"))
            return None
        total = sum(item["price"] * item["qty"] for item in items)
        context.record_metric("order_total", total)
        return {"id": input["id"], "total": round(total, 2), "items": len(items)}
