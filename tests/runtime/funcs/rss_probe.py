"""Reports its Python worker's memory: ``"<rss at initialize> <peak rss now>"`` in kB per message."""

from __future__ import annotations

from typing import Any

from sparkfn import Context, Function


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class RssProbe(Function):
    def initialize(self, context: Context) -> None:
        self.initial = _status_kb("VmRSS")

    def process(self, input: Any, context: Context) -> str:
        return f"{self.initial} {_status_kb('VmHWM')}"
