"""The shapes a user function can take.

Three forms, from the simplest:

1. A plain function in a module, no SDK at all::

       def process(input):
           return input + "!"

2. A :class:`Function` subclass, with a :class:`~sparkfn.api.context.Context`::

       class WordCount(Function):
           def process(self, input, context):
               for word in input.split():
                   context.incr_counter(word, 1)
               return input

3. A :class:`VectorizedFunction` (or a plain function marked with
   :func:`vectorized`) that takes a whole batch and returns one.

Lifecycle, for every form that has the methods (called by sparkfn inside a
Spark Python worker process; one object per function instance per process):

* ``initialize(context)`` -- once per object, before any ``process``.
* ``process(...)`` -- once per message (or batch), never concurrently on one
  object. Returning ``None`` emits nothing.
* ``close()`` -- when the function stops, at most once per initialized object,
  and nothing is called on the object after it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

if TYPE_CHECKING:
    from sparkfn.api.context import Context

BatchFormat = Literal["arrow", "pandas"]
F = TypeVar("F", bound=Callable[..., Any])


class Function(ABC):
    """Base class for per-message functions (the Pulsar ``Function`` shape).

    >>> class Exclamation(Function):
    ...     def process(self, input, context):
    ...         return input + "!"
    """

    def initialize(self, context: Context) -> None:  # noqa: B027 - optional hook
        """Called once per object, before the first ``process``."""

    @abstractmethod
    def process(self, input: Any, context: Context) -> Any:
        """Handle one message; the return value (unless ``None``) goes to the output topic.

        ``input`` is the message value decoded per the input topic's schema
        type (``bytes``, ``str``, or the parsed JSON value). Raising marks the
        message failed: everything it emitted or changed is discarded.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once when the function stops; nothing is called after it."""


class VectorizedFunction(ABC):
    """Base class for batch functions: a batch of messages in, a batch out.

    ``batch_format`` chooses what ``process_batch`` receives: a
    ``pyarrow.RecordBatch`` (``"arrow"``, the default) or a
    ``pandas.DataFrame`` (``"pandas"``). Columns: ``key``, ``value`` (decoded
    per the topic schema: binary, string, or JSON text), ``properties``,
    ``event_time``, ``topic``, ``partition``, ``offset``. The result must be
    the same kind of batch with a ``value`` column and optionally ``key``,
    ``properties`` and ``event_time``; ``None`` emits nothing.

    >>> class Upper(VectorizedFunction):
    ...     def process_batch(self, batch, context):
    ...         import pyarrow.compute as pc
    ...         return batch.select(["key"]).append_column("value", pc.utf8_upper(batch["value"]))
    """

    batch_format: ClassVar[BatchFormat] = "arrow"

    def initialize(self, context: Context) -> None:  # noqa: B027 - optional hook
        """Called once per object, before the first ``process_batch``."""

    @abstractmethod
    def process_batch(self, batch: Any, context: Context) -> Any:
        """Handle a batch of messages; return the batch of outputs, or ``None``."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once when the function stops; nothing is called after it."""


VECTORIZED_ATTR = "__sparkfn_batch_format__"


def vectorized(fn: F | None = None, *, batch_format: BatchFormat = "arrow") -> Any:
    """Mark a plain function ``f(batch) -> batch`` as vectorized.

    >>> @vectorized(batch_format="pandas")
    ... def shout(df):
    ...     return df.assign(value=df["value"].str.upper())
    """
    if batch_format not in ("arrow", "pandas"):
        msg = f"batch_format must be 'arrow' or 'pandas'; got {batch_format!r}"
        raise ValueError(msg)

    def mark(target: F) -> F:
        setattr(target, VECTORIZED_ATTR, batch_format)
        return target

    return mark(fn) if fn is not None else mark
