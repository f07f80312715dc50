"""Window functions: a function given a window of messages instead of one message.

A function whose config has ``window_config`` (Pulsar's ``windowConfig``)
is called once per window, with a :class:`Window`: the window's messages as
:class:`WindowRecord` objects, in the order the instance received them
(Pulsar's Java ``WindowFunction`` gets a ``Collection<Record<T>>``). What it
returns goes to the output topic, as a plain function's result does.

>>> class Total(WindowFunction):
...     def process(self, inputs, context):
...         return sum(int(record.value) for record in inputs)

A plain ``process(inputs)`` function or a ``Function`` subclass is called
the same way when the config has ``window_config``. Event time comes from a
:class:`TimestampExtractor` named by ``timestampExtractorClassName``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from sparkfn.api.context import Context


@dataclass(frozen=True)
class WindowRecord:
    """One message of a window (the Python form of Pulsar's ``Record``).

    ``value`` is decoded as a plain function's input is; ``timestamp`` is
    the time (ms since the epoch) the window placed it by: its event time
    from the timestamp extractor, else when the instance received it.
    """

    value: Any
    key: str | None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: int | None = None  # the message's own event time, ms; None if it has none
    timestamp: int = 0
    topic: str = ""  # persistent://tenant/namespace/name
    message_id: str = ""  # partition:offset

    def get_value(self) -> Any:
        """The decoded value (Pulsar's ``Record.getValue``)."""
        return self.value

    def get_key(self) -> str | None:
        """The message's key."""
        return self.key

    def get_properties(self) -> dict[str, str]:
        """The message's properties."""
        return dict(self.properties)

    def get_event_time(self) -> int | None:
        """The message's event time in ms, or None."""
        return self.event_time

    def get_topic_name(self) -> str:
        """``persistent://tenant/namespace/name`` of the message's topic."""
        return self.topic


class Window(Sequence[WindowRecord]):
    """A window's messages, oldest first; ``start``/``end`` bound a time window.

    A time window holds the messages timed in ``(start, end]`` (ms since the
    epoch); a counted one has ``start`` and ``end`` ``None``.
    """

    def __init__(
        self, records: Sequence[WindowRecord], start: int | None = None, end: int | None = None
    ) -> None:
        self._records = tuple(records)
        self.start = start
        self.end = end

    @overload
    def __getitem__(self, index: int) -> WindowRecord: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[WindowRecord]: ...
    def __getitem__(self, index: int | slice) -> WindowRecord | Sequence[WindowRecord]:
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[WindowRecord]:
        return iter(self._records)

    def values(self) -> list[Any]:
        """The messages' values, oldest first."""
        return [record.value for record in self._records]

    def __repr__(self) -> str:
        bounds = f", start={self.start}, end={self.end}" if self.end is not None else ""
        return f"Window({len(self._records)} messages{bounds})"


class WindowFunction(ABC):
    """Base class for window functions (Pulsar's ``WindowFunction``); needs ``window_config``."""

    def initialize(self, context: Context) -> None:  # noqa: B027 - optional hook
        """Called once per object, before the first ``process``."""

    @abstractmethod
    def process(self, inputs: Window, context: Context) -> Any:
        """Handle one window; the return value (unless ``None``) goes to the output topic.

        Raising fails the window: it is tried again at once, ``max_message_retries``
        times (none when unset: a window cannot wait to be delivered again), then
        each of its messages goes to the dead-letter topic.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once when the function stops; nothing is called after it."""


class TimestampExtractor(ABC):
    """Gives a message's event time (Pulsar's ``TimestampExtractor``), for
    ``timestampExtractorClassName``. A plain function ``f(value) -> int`` works too."""

    @abstractmethod
    def extract_timestamp(self, input: Any) -> int:
        """The event time of the message whose decoded value is ``input``, in ms since the epoch."""


class MessageEventTime(TimestampExtractor):
    """The message's own event time (set by its producer): name
    ``sparkfn.api.window.MessageEventTime`` as ``timestampExtractorClassName``.
    A message without one fails (and goes to the dead-letter topic)."""

    def extract_timestamp(self, input: Any) -> int:
        """Not called: the runtime reads the message's event time itself."""
        msg = "MessageEventTime reads the message's event time, not its value"
        raise TypeError(msg)
