"""What some members ask of their group's reader beyond their inputs' data.

The group's reader (:mod:`.reader`) plans every member the same way; a few
members' configs, or the start of a group of one (:mod:`.solo`), ask for
more, and each is kept here so the reader stays one loop:

* a ``topics_pattern``: the member reads the topics its pattern matches now,
  and those created while it runs from their first message, as Pulsar's
  pattern consumers find them (:class:`PatternInputs`);
* a window that fires on the clock (``windowConfig`` with a time length):
  a batch runs at least every tick, input or not, with a tick marker per live
  instance (:func:`tick_due`; the offsets key ``__tick__/<control id>``);
* a byte budget (``max_bytes_per_batch``, or the reader's ``memberBytes``):
  the member's rows in a batch are capped by their mean stored size too;
* a probe (reader option ``probes``, a poison hunt of the member's supervisor,
  :mod:`sparkfn.runtime.lifecycle.poison`): the member's batches read no
  further than the probe's ends, and only those partitions, until its
  cursors reach them; ``exitNotes`` names the file where the daemon writes
  the exit status of a Python worker that dies under the member's slice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from sparkfn.api.errors import ConfigError
from sparkfn.config.function import FunctionConfig
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.discovery import TopicDiscovery
from sparkfn.topics.spark.planning import offset_key

TICK_PREFIX = "__tick__/"


class PatternInputs:
    """The topics each pattern member reads, kept across the reader's triggers."""

    def __init__(self, store_url: str, data_dir: str) -> None:
        self.store_url = store_url
        self.data_dir = data_dir
        self._found: dict[str, tuple[str, TopicDiscovery, list[TopicInfo]]] = {}

    def topics(self, control_id: str, config: FunctionConfig) -> list[TopicInfo]:
        """The topics ``config.topics_pattern`` matches, those gained since adopted by its
        subscription from their first message (see :mod:`sparkfn.topics.discovery`)."""
        pattern = config.topics_pattern or ""
        entry = self._found.get(control_id)
        if entry is None or entry[0] != pattern:
            discovery = TopicDiscovery(self.store_url, self.data_dir, pattern)
            entry = (pattern, discovery, discovery.adopt([], config.subscription))
        elif entry[1].due():
            added = entry[1].adopt(entry[2], config.subscription)
            entry = (pattern, entry[1], [*entry[2], *added])
        self._found[control_id] = entry
        return entry[2]

    def forget(self, keep: set[str]) -> None:
        """Drop what is kept for members no longer in the group."""
        for cid in set(self._found) - keep:
            del self._found[cid]


def tick_ms(config: FunctionConfig) -> int | None:
    """How often the member's windows look at the clock (None: they do not)."""
    window = config.window_config
    return window.ticks_ms if window is not None else None


def tick_due(config: FunctionConfig, control_id: str, start: Mapping[str, int]) -> int | None:
    """The member's clock tick now, if it is past the one ``start`` records."""
    every = tick_ms(config)
    if every is None:
        return None
    tick = int(time.time() * 1000) // every
    return tick if tick > start.get(TICK_PREFIX + control_id, 0) else None


def probe_ends(
    probes: Mapping[str, list[list[int]]], control_id: str, topics: list[TopicInfo]
) -> dict[str, int] | None:
    """The member's probe as offsets keys, or None without one."""
    found = probes.get(control_id)
    if found is None:
        return None
    names = {t.id: t for t in topics}
    return {offset_key(names[tid], part): int(end) for tid, part, end in found if tid in names}


def parse_probes(text: str | None) -> dict[str, list[list[int]]]:
    """Reader option ``probes``: ``{control id: [[topic id, partition, end], ...]}``."""
    if not text:
        return {}
    try:
        found = json.loads(text)
        return {str(cid): [[int(x) for x in e] for e in ends] for cid, ends in found.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        msg = f"sparkfn-group data source: option 'probes' {text!r} is not a probe per member"
        raise ConfigError(msg) from exc


def parse_notes(text: str | None) -> dict[str, str]:
    """Reader option ``exitNotes``: ``{control id: file}``."""
    if not text:
        return {}
    try:
        return {str(k): str(v) for k, v in json.loads(text).items()}
    except (ValueError, TypeError, AttributeError) as exc:
        msg = f"sparkfn-group data source: option 'exitNotes' {text!r} is not a file per member"
        raise ConfigError(msg) from exc
