"""Keeps the Context its process() saw, for a thread of the test's to use between tasks."""

from __future__ import annotations

from typing import Any

from sparkfn import Context, Function

KEPT: list[Context] = []


class ContextKeeper(Function):
    def process(self, input: Any, context: Context) -> Any:
        KEPT.append(context)
        return input
