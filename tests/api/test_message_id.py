"""MessageId: Pulsar's message id methods over sparkfn's ``partition:offset``."""

from __future__ import annotations

import pytest

from sparkfn import MessageId


def test_str_is_partition_colon_offset_and_the_methods_map_onto_it() -> None:
    message_id = MessageId(3, 1042)
    assert (str(message_id), f"{message_id}", repr(message_id)) == (
        "3:1042",
        "3:1042",
        "MessageId(3, 1042)",
    )
    assert (message_id.partition(), message_id.entry_id()) == (3, 1042)
    assert (message_id.ledger_id(), message_id.batch_index()) == (0, -1)


def test_serialize_round_trips_and_ids_order_by_partition_then_offset() -> None:
    ids = [MessageId(1, 10), MessageId(0, 99), MessageId(1, 2)]
    assert sorted(ids) == [MessageId(0, 99), MessageId(1, 2), MessageId(1, 10)]
    for message_id in ids:
        assert MessageId.deserialize(message_id.serialize(), topic="t") == message_id
    assert MessageId.deserialize("1:2") == MessageId(1, 2)
    assert len({MessageId(1, 2), MessageId(1, 2)}) == 1
    assert MessageId(1, 2) != "1:2"
    with pytest.raises(ValueError, match="is not a message id"):
        MessageId.deserialize(b"12")
