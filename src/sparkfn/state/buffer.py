"""State changes buffered until their batch commits.

A :class:`StateBuffer` holds what one instance changed during one task:
counter deltas, values set, keys deleted. Per message it keeps a savepoint,
so a failed ``process`` call's changes are rolled back and leave no trace.
At commit the buffer becomes a list of :class:`StateMutation`, applied in one
store transaction with the batch's outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class _Unset(Enum):
    """The marker for "no value set".

    An enum member, so it is still itself after pickling (mutations travel
    from executors to the driver); a bare ``object()`` is not.
    """

    UNSET = "unset"


_UNSET = _Unset.UNSET


@dataclass
class StateMutation:
    """The net effect of a task on one key, applied in this order at commit.

    ``delete``: remove the key first; then add ``counter_delta`` to its
    counter; then, unless ``value`` is unset, set its value (``None`` clears it).
    """

    key: str
    delete: bool = False
    counter_delta: int = 0
    value: bytes | None | object = field(default=_UNSET)

    @property
    def sets_value(self) -> bool:
        """Whether the mutation sets (or clears) the value."""
        return self.value is not _UNSET


@dataclass(frozen=True)
class CommittedState:
    """One key as committed: its counter and value."""

    counter: int | None
    value: bytes | None


StateReader = Callable[[str], CommittedState]


class StateBuffer:
    """Read-your-writes view over committed state, with per-message savepoints."""

    def __init__(self, reader: StateReader) -> None:
        self._reader = reader
        self._cache: dict[str, CommittedState] = {}
        self._mutations: dict[str, StateMutation] = {}
        # Each key's mutation as it was when the current message began. Always
        # recording (instead of switching it on per message) keeps the
        # per-message cost of the hot loop at "clear it if it is not empty".
        self.savepoint: dict[str, StateMutation] = {}

    def _committed(self, key: str) -> CommittedState:
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._reader(key)
        return found

    def _mutation(self, key: str) -> StateMutation:
        if key not in self.savepoint:
            current = self._mutations.get(key)
            self.savepoint[key] = StateMutation(key) if current is None else _copy(current)
        mutation = self._mutations.get(key)
        if mutation is None:
            mutation = self._mutations[key] = StateMutation(key)
        return mutation

    # --- message savepoints --------------------------------------------------
    def begin_message(self) -> None:
        """Start a savepoint: changes from here can be rolled back."""
        if self.savepoint:
            self.savepoint.clear()

    def commit_message(self) -> None:
        """Keep the changes since :meth:`begin_message`."""
        if self.savepoint:
            self.savepoint.clear()

    def rollback_message(self) -> None:
        """Undo the changes since :meth:`begin_message`."""
        for key, before in self.savepoint.items():
            if before.delete or before.counter_delta or before.sets_value:
                self._mutations[key] = before
            else:
                self._mutations.pop(key, None)
        self.savepoint.clear()

    # --- the Context operations ----------------------------------------------
    def incr_counter(self, key: str, amount: int) -> None:
        """Add ``amount`` to counter ``key``."""
        self._mutation(key).counter_delta += amount

    def get_counter(self, key: str) -> int:
        """Committed counter plus this buffer's changes."""
        mutation = self._mutations.get(key)
        base = 0
        if mutation is None or not mutation.delete:
            base = self._committed(key).counter or 0
        return base + (mutation.counter_delta if mutation else 0)

    def put_state(self, key: str, value: bytes) -> None:
        """Set value ``key``."""
        self._mutation(key).value = value

    def get_state(self, key: str) -> bytes | None:
        """Committed value, or this buffer's."""
        mutation = self._mutations.get(key)
        if mutation is not None and mutation.sets_value:
            return mutation.value  # type: ignore[return-value]
        if mutation is not None and mutation.delete:
            return None
        return self._committed(key).value

    def delete(self, key: str) -> None:
        """Delete ``key`` (counter and value)."""
        mutation = self._mutation(key)
        mutation.delete = True
        mutation.counter_delta = 0
        mutation.value = _UNSET

    # --- the batch -------------------------------------------------------------
    def drain(self) -> list[StateMutation]:
        """The net mutations so far, clearing the buffer (and the read cache)."""
        out = [m for m in self._mutations.values() if m.delete or m.counter_delta or m.sets_value]
        self._mutations = {}
        self._cache = {}
        self.savepoint.clear()
        return out


def _copy(mutation: StateMutation) -> StateMutation:
    return StateMutation(mutation.key, mutation.delete, mutation.counter_delta, mutation.value)
