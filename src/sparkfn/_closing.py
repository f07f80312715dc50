"""``with`` support for the objects that have a ``close()``: a run, a harness."""

from __future__ import annotations

from abc import abstractmethod
from types import TracebackType
from typing import Self


class Closing:
    """``with obj as x:`` gives ``obj`` and calls ``obj.close()`` on the way out, error or not."""

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds; idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
