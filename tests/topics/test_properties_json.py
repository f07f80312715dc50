"""Properties as JSON text: the form the function runtime ships them in."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkfn.api.errors import PayloadError
from sparkfn.config.names import TopicName
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.message import (
    PROPERTIES,
    SchemaType,
    properties_from_json,
    properties_list,
    properties_to_json,
)
from sparkfn.topics.spark.commit import to_stored_table

_props = st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3))


@given(st.lists(_props, max_size=8), st.integers(0, 3))
def test_json_text_round_trips_to_the_same_map(rows: list[dict[str, str] | None], cut: int) -> None:
    column = pa.array([None if p is None else list(p.items()) for p in rows], PROPERTIES)
    column = column.slice(min(cut, len(rows)))  # offsets of a slice start past zero
    text = properties_to_json(column)
    assert text.type == pa.string()
    expected = [p or None for p in rows[min(cut, len(rows)) :]]
    assert [None if t is None else dict(properties_list(t) or []) for t in text.to_pylist()] == (
        expected
    )
    back = properties_from_json(text)
    assert back.type == PROPERTIES
    assert [dict(p) if p is not None else None for p in back.to_pylist()] == expected


def test_no_properties_at_all_is_an_all_null_column() -> None:
    column = pa.array([None, [], None], PROPERTIES)
    assert properties_to_json(column).null_count == 3
    assert properties_from_json(pa.nulls(2, pa.string())).type == PROPERTIES


def test_the_sink_takes_json_text_properties_and_names_a_bad_one() -> None:
    info = TopicInfo(1, TopicName.parse("t"), 1, SchemaType.STRING, None, None, datetime.now(UTC))
    good = pa.record_batch({"value": ["a", "b"], "properties": ['{"k":"v"}', None]})
    stored = to_stored_table(good, info)
    assert stored.column("properties").to_pylist() == [[("k", "v")], None]
    bad = pa.record_batch({"value": ["a"], "properties": ["[1, 2]"]})
    with pytest.raises(PayloadError, match="properties: a value is not a JSON object of strings"):
        to_stored_table(bad, info)
