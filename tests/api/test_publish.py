"""``context.publish``'s arguments, read with Pulsar's rules."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sparkfn.api.publish import CompressionType, read_publish


def test_message_conf_gives_key_properties_and_event_time() -> None:
    publication = read_publish(
        "t",
        "v",
        None,
        None,
        CompressionType.LZ4,
        None,
        {
            "properties": {"a": "1"},
            "partition_key": "k",
            "event_timestamp": 1_700_000_000_123,
            "sequence_id": 7,
            "replication_clusters": ["x"],
            "disable_replication": True,
        },
    )
    assert (publication.key, publication.properties) == ("k", {"a": "1"})
    assert publication.event_time == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)


def test_the_properties_argument_replaces_message_conf_properties() -> None:
    publication = read_publish(
        "t", "v", None, {"b": "2"}, None, None, {"properties": {"a": "1"}, "ordering_key": "o"}
    )
    assert (publication.properties, publication.key) == ({"b": "2"}, "o")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"message_conf": {"colour": "red"}}, TypeError, "unexpected keys \\['colour'\\]"),
        ({"message_conf": {"deliver_after": 5}}, ValueError, "delayed delivery"),
        ({"compression_type": "lz4"}, TypeError, "must be a CompressionType"),
        ({"callback": "not callable"}, TypeError, "callback must be callable"),
        ({"properties": {"n": 1}}, TypeError, "keys and values must be str"),
    ],
)
def test_bad_arguments_fail_as_pulsar_send_async_would(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    arguments = {
        "properties": None,
        "compression_type": None,
        "callback": None,
        "message_conf": None,
        **kwargs,
    }
    with pytest.raises(error, match=match):
        read_publish("t", "v", None, **arguments)  # type: ignore[arg-type]
