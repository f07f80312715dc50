"""EmitBuffer: per-record messages and whole columns, in order, cut off on failure."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkfn.runtime.function.emit import EMIT_SCHEMA, EmitBuffer, Emitted


def _one(i: int) -> Emitted:
    return Emitted("output", "out", f"r{i}".encode(), f"k{i}", {"n": str(i)})


def _column(first: int, n: int) -> tuple[pa.Array, pa.Array]:
    values = pa.array([f"c{i}".encode() for i in range(first, first + n)], pa.binary())
    keys = pa.array([f"k{i}" for i in range(first, first + n)], pa.string())
    return values, keys


def test_rows_and_columns_keep_their_order() -> None:
    buffer = EmitBuffer()
    buffer.append(_one(0))
    values, keys = _column(1, 3)
    buffer.extend("output", "out", values, keys)
    buffer.append(_one(4))
    assert len(buffer) == 5
    batch = buffer.to_batch()
    assert batch.schema == EMIT_SCHEMA
    assert batch.column("value").to_pylist() == [b"r0", b"c1", b"c2", b"c3", b"r4"]
    assert batch.column("key").to_pylist() == ["k0", "k1", "k2", "k3", "k4"]
    assert [e.properties for e in buffer.items()] == [{"n": "0"}, {}, {}, {}, {"n": "4"}]
    assert EmitBuffer().to_batch().num_rows == 0


# Each step: ("row", _) appends one message, ("cols", n) adds n as columns,
# ("cut", k) truncates to k messages from the start (as a failed message does).
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("row"), st.just(0)),
        st.tuples(st.just("cols"), st.integers(0, 4)),
        st.tuples(st.just("cut"), st.integers(0, 12)),
    ),
    max_size=12,
)


@given(_steps)
def test_truncate_matches_a_plain_list(steps: list[tuple[str, int]]) -> None:
    buffer, expected, counter = EmitBuffer(), [], 0
    for op, arg in steps:
        if op == "row":
            buffer.append(_one(counter))
            expected.append(f"r{counter}".encode())
            counter += 1
        elif op == "cols":
            values, keys = _column(counter, arg)
            buffer.extend("output", "out", values, keys)
            expected.extend(values.to_pylist())
            counter += arg
        else:
            length = min(arg, len(expected))
            buffer.truncate(length)
            del expected[length:]
        assert len(buffer) == len(expected)
    assert buffer.to_batch().column("value").to_pylist() == expected


@pytest.mark.parametrize("n", [0, 1])
def test_extend_with_defaults_gives_null_keys_properties_and_times(n: int) -> None:
    buffer = EmitBuffer()
    buffer.extend("publish", "elsewhere", pa.array([b"x"] * n, pa.binary()))
    assert buffer.items() == [Emitted("publish", "elsewhere", b"x", None, {}, None)] * n


_kinds = st.lists(
    st.one_of(
        st.tuples(st.just("output"), st.just("out"), st.none()),
        st.tuples(
            st.sampled_from(["publish", "log", "dead_letter"]), st.just("elsewhere"), st.none()
        ),
        st.tuples(st.just("output"), st.just("out"), st.just(datetime(2026, 1, 1, tzinfo=UTC))),
        st.tuples(st.just("cut"), st.integers(0, 12), st.none()),
        st.tuples(st.just("seal"), st.just(""), st.none()),
    ),
    max_size=14,
)


@given(_kinds)
def test_every_message_keeps_its_kind_topic_and_time_across_cuts_and_seals(
    steps: list[tuple[str, object, datetime | None]],
) -> None:
    # Outputs to the buffer's own topic keep only their value, key and properties per
    # message; every other message's kind, topic and time is kept by its position.
    buffer = EmitBuffer("out")
    expected: list[tuple[str, str, bytes, datetime | None]] = []
    for n, (kind, arg, when) in enumerate(steps):
        if kind == "cut":
            length = min(int(str(arg)), len(expected))
            buffer.truncate(length)
            del expected[length:]
        elif kind == "seal":
            values, _ = _column(100 + n, 1)
            buffer.extend("output", "out", values)
            expected.append(("output", "out", values[0].as_py(), None))
        else:
            buffer.append(Emitted(kind, str(arg), f"m{n}".encode(), None, {}, when))
            expected.append((kind, str(arg), f"m{n}".encode(), when))
    batch = buffer.to_batch()
    got = list(
        zip(
            batch.column("kind").to_pylist(),
            batch.column("topic").to_pylist(),
            batch.column("value").to_pylist(),
            batch.column("event_time").to_pylist(),
            strict=True,
        )
    )
    assert got == expected
