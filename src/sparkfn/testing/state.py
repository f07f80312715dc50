"""The harness's state: the function's key space as an in-memory dict.

What a batch changed is applied when it commits, as the store's commit
applies it (delete, add to the counter, set the value); an operator's
``putstate`` sets a key outright.
"""

from __future__ import annotations

from collections.abc import Iterable

from sparkfn.state.buffer import CommittedState, StateMutation


class InMemoryState:
    """Committed counters and values by key."""

    def __init__(self) -> None:
        self._committed: dict[str, CommittedState] = {}

    def read(self, key: str) -> CommittedState:
        """The key as committed (``CommittedState(None, None)`` if never set)."""
        return self._committed.get(key, CommittedState(None, None))

    def commit(self, mutations: Iterable[StateMutation]) -> None:
        """Apply a batch's net mutations."""
        for mutation in mutations:
            _apply(self._committed, mutation)

    def put(self, key: str, value: bytes | None, counter: int | None) -> None:
        """Set a key outright; with neither a value nor a counter, delete it."""
        if value is None and counter is None:
            self._committed.pop(key, None)
        else:
            self._committed[key] = CommittedState(counter, value)

    @property
    def counters(self) -> dict[str, int]:
        """Committed counters."""
        return {k: s.counter for k, s in self._committed.items() if s.counter is not None}

    @property
    def values(self) -> dict[str, bytes]:
        """Committed state values."""
        return {k: s.value for k, s in self._committed.items() if s.value is not None}


def _apply(state: dict[str, CommittedState], mutation: StateMutation) -> None:
    """Apply a net mutation as the store's commit does (delete, add, set)."""
    old = None if mutation.delete else state.get(mutation.key)
    counter = None if old is None else old.counter
    if mutation.counter_delta:
        counter = (counter or 0) + mutation.counter_delta
    value = old.value if old is not None else None
    if mutation.sets_value:
        value = mutation.value  # type: ignore[assignment]
    if counter is None and value is None:
        state.pop(mutation.key, None)
    else:
        state[mutation.key] = CommittedState(counter, value)
