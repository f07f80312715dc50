"""A window function's kept state and its timestamp extractor.

:class:`Pane` is what :class:`~sparkfn.runtime.function.window.WindowRunner`
keeps in the function's state between batches (one per instance, under
:func:`state_key`); :func:`load_extractor` loads Pulsar's
``timestampExtractorClassName``.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkfn._usercode import resolve_classname
from sparkfn.api.errors import FunctionLoadError
from sparkfn.api.window import MessageEventTime
from sparkfn.config.function import FunctionConfig

# One buffered message: (timestamp ms, value, key, properties, event time ms, topic, message id).
Held = tuple[int, bytes | None, str | None, tuple[tuple[str, str], ...], int | None, str, str]
_PANE_VERSION = 2  # 1: max_seen was one time for every topic
# The metric (in the instance's stats, as its user metrics are) counting late
# messages dropped for want of a lateDataTopic.
LATE_DROPPED_METRIC = "__late_messages_dropped__"
MAX_INSTANCES = 256  # FunctionConfig.parallelism's bound: the instance ids a pane may belong to


def state_key(instance_id: int) -> str:
    """The state key of one instance's pane (shown by ``querystate`` like any key)."""
    return f"__sparkfn.window.{instance_id}"


@dataclass
class Pane:
    """An instance's window state: the messages it holds and where its windows are."""

    held: list[Held] = field(default_factory=list)
    since_fire: int = 0  # count windows: messages since the last window fired
    done_end: int | None = None  # time windows: the end of the last window looked at
    watermark: int | None = None  # event time: the last watermark
    # event time: the latest message time seen, per input topic
    max_seen: dict[str, int] = field(default_factory=dict)

    def dump(self) -> bytes:
        """The pane as its state value."""
        body = (self.held, self.since_fire, self.done_end, self.watermark, self.max_seen)
        return pickle.dumps((_PANE_VERSION, body), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def load(cls, data: bytes | None) -> Pane:
        """A pane from its state value (``None``: a new one)."""
        if data is None:
            return cls()
        version, body = pickle.loads(data)  # noqa: S301 - sparkfn's own state value
        if version not in (1, _PANE_VERSION):
            msg = f"window state of version {version} is not readable by this sparkfn"
            raise ValueError(msg)
        held, since_fire, done_end, watermark, max_seen = body
        if not isinstance(max_seen, dict):
            max_seen = {}  # version 1's one time: the watermark it made is kept
        return cls(list(held), since_fire, done_end, watermark, dict(max_seen))


def load_extractor(config: FunctionConfig) -> Callable[[Any], Any]:
    """The function's timestamp extractor as ``f(value) -> ms``; :class:`FunctionLoadError`
    naming ``timestampExtractorClassName`` when it cannot be loaded or used."""
    window = config.window_config
    name = window.timestamp_extractor_class_name if window is not None else None
    what = f"function {config.fqfn}: windowConfig.timestampExtractorClassName"
    if not name:
        msg = f"{what} is not set"
        raise FunctionLoadError(msg)
    target = resolve_classname(what, None, name, FunctionLoadError)
    if target is MessageEventTime:
        return MESSAGE_EVENT_TIME
    try:
        obj = target() if isinstance(target, type) else target
    except Exception as exc:
        msg = f"{what}: creating {name}() failed: {type(exc).__name__}: {exc}"
        raise FunctionLoadError(msg) from exc
    method = getattr(obj, "extract_timestamp", None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    if callable(obj):
        return obj  # type: ignore[no-any-return]
    msg = f"{what}: {name} has no extract_timestamp(value) and is not callable"
    raise FunctionLoadError(msg)


def _message_event_time(value: Any) -> int:
    msg = "not called: the runner reads the message's event time"
    raise AssertionError(msg)


MESSAGE_EVENT_TIME: Callable[[Any], Any] = _message_event_time
