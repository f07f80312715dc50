"""``generator``: made-up records, for tests and demos.

::

    sparkfn sources localrun --source-type generator --output demo \\
        --source-config '{"count": 1000, "rate": 100, "value": "order {index}", "key": "k{bucket}", "buckets": 4}'

configs (all optional):

``count``
    How many records in all (over every instance); then ``END_OF_STREAM``,
    which is a drain. ``null`` (the default): unbounded.
``rate``
    Records per second in all (spread over the instances); ``null``: as fast
    as the topic takes them.
``value``
    A template (Python ``str.format``) for each record's value; fields
    ``index`` (0, 1, ...), ``instance``, ``bucket`` (``index % buckets``) and
    ``time`` (epoch milliseconds). Default ``message-{index}``.
``value_kind``
    ``string`` (the text; default), ``bytes`` (its UTF-8) or ``json`` (the
    object ``{"index": .., "instance": .., "value": text, "time": ..}``).
``key``
    A template for each record's key (same fields); default no key.
``buckets``
    The modulus of ``bucket`` (default 1).
``records_per_read``
    How many records one ``read()`` returns at most (default 100).

Instance ``k`` of ``P`` makes the records whose index is ``k, k+P, k+2P, ...``;
each record's ``sequence_id`` is its index (per instance), so under
``effectively_once`` a restarted generator adds only records it has not
appended before.
"""

from __future__ import annotations

import string
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from sparkfn.api.connector import END_OF_STREAM, Record, Source, SourceContext, _EndOfStream
from sparkfn.api.errors import ConfigError
from sparkfn.connectors.builtin._config import BuiltinConfig, Count, describe, dumps, parse_configs

TEMPLATE_FIELDS = ("index", "instance", "bucket", "time")


class GeneratorConfig(BuiltinConfig):
    """The generator's configs."""

    count: int | None = Field(default=None, ge=0, le=10**15)
    rate: float | None = Field(default=None, gt=0, le=10**7)
    value: str = "message-{index}"
    value_kind: Literal["string", "bytes", "json"] = "string"
    key: str | None = None
    buckets: int = Field(default=1, ge=1, le=1_000_000)
    records_per_read: Count = 100

    @field_validator("value", "key")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return value
        for _, name, _, _ in string.Formatter().parse(value):
            if name is not None and name.split(".")[0].split("[")[0] not in TEMPLATE_FIELDS:
                known = ", ".join(TEMPLATE_FIELDS)
                msg = f"template field {{{name}}} is not one of: {known}"
                raise ValueError(msg)
        return value


class GeneratorSource(Source):
    """Generates ``count`` records (or forever) at ``rate`` per second."""

    def __init__(self) -> None:
        self.config = GeneratorConfig()
        self.instance = 0
        self.instances = 1
        self.next_index = 0
        self.made = 0
        self.started = 0.0
        self.per_second: float | None = None

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:
        """Validate the configs and start the clock."""
        what = describe("source", "generator", context)
        self.config = parse_configs(GeneratorConfig, config, what)
        self.instance = context.get_instance_id()
        self.instances = context.get_num_instances()
        self.next_index = self.instance
        if self.config.rate is not None:
            self.per_second = self.config.rate / self.instances
        try:
            self._record(0)
        except (KeyError, IndexError, ValueError) as exc:
            msg = f"{what}: configs.value or configs.key: cannot format: {exc}"
            raise ConfigError(msg) from exc
        self.started = time.monotonic()

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """The records due now; ``END_OF_STREAM`` after the last."""
        count = self.config.count
        if count is not None and self.next_index >= count:
            return END_OF_STREAM
        limit = self.config.records_per_read
        if self.per_second is not None:
            due = int((time.monotonic() - self.started) * self.per_second) + 1 - self.made
            if due <= 0:
                return None
            limit = min(limit, due)
        records: list[Record] = []
        while len(records) < limit and (count is None or self.next_index < count):
            records.append(self._record(self.next_index))
            self.next_index += self.instances
            self.made += 1
        return records

    def _record(self, index: int) -> Record:
        now = int(time.time() * 1000)
        fields = {
            "index": index,
            "instance": self.instance,
            "bucket": index % self.config.buckets,
            "time": now,
        }
        text = self.config.value.format(**fields)
        value: Any = text
        if self.config.value_kind == "bytes":
            value = text.encode()
        elif self.config.value_kind == "json":
            value = dumps({"index": index, "instance": self.instance, "value": text, "time": now})
        key = self.config.key.format(**fields) if self.config.key is not None else None
        return Record(
            value=value,
            key=key,
            event_time=now,
            sequence_id=index,
            source_partition=f"generator-{self.instance}",
        )
