"""``sparkfn topics produce`` and ``consume``: writing messages to a topic and reading them.

::

    sparkfn topics produce orders -m '{"id": 1}' -m '{"id": 2}' --key alice
    sparkfn topics produce orders --file - < orders.jsonl
    sparkfn topics consume orders -s audit -n 10 --json
    sparkfn topics consume orders --follow

The commands are registered on ``sparkfn topics`` by :mod:`sparkfn.cli.topics`,
next to the admin commands. ``consume --json`` prints one JSON object per line.
The topic modules (pyarrow) are imported inside the commands.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.table import Table
from rich.text import Text

from sparkfn.cli.context import console, emit_json, open_store
from sparkfn.cli.options import TopicArgument
from sparkfn.cli.params import format_time, parse_event_time, parse_properties

if TYPE_CHECKING:
    from sparkfn.topics.message import ReceivedMessage, SchemaType
    from sparkfn.topics.producer import Producer

PositionName = Literal["earliest", "latest"]

# Subscription and producer names are stored in VARCHAR(256) columns.
MAX_NAME_LENGTH = 256
# Messages fetched per poll while consuming.
CONSUME_BATCH = 500
# How long one poll waits for new messages in --follow mode, in seconds.
FOLLOW_POLL_SECONDS = 1.0


def _check_name(value: str | None, option: str) -> str | None:
    if value is None:
        return None
    if not value.strip() or len(value) > MAX_NAME_LENGTH:
        msg = f"{value!r} must be a non-empty name of at most {MAX_NAME_LENGTH} characters"
        raise typer.BadParameter(msg, param_hint=f"'{option}'")
    return value


def _read_lines(file: str) -> tuple[str, list[tuple[int, bytes]]]:
    """``(where, [(line number, bytes)])`` from a file or, for ``-``, stdin.

    Lines are bytes, so a ``bytes`` topic gets them unchanged and a ``string``
    topic can report invalid UTF-8 by line. Empty lines are skipped.
    """
    if file == "-":
        where, data = "stdin", sys.stdin.buffer.read()
    else:
        where = file
        try:
            data = Path(file).read_bytes()
        except OSError as exc:
            msg = f"cannot read {file!r}: {exc.strerror or exc}"
            raise typer.BadParameter(msg, param_hint="'--file'") from exc
    return where, [(n, line) for n, line in enumerate(data.splitlines(), start=1) if line]


def _checked(values: list[tuple[str, bytes]], schema_type: SchemaType, topic: str) -> list[bytes]:
    """The values, each checked against the topic schema; errors say where it came from."""
    from sparkfn.api.errors import PayloadError
    from sparkfn.topics.message import check_values

    for where, data in values:
        try:
            check_values([data], schema_type, topic=topic)
        except PayloadError as exc:
            cause = exc.__cause__ or exc
            msg = (
                f"topic {topic} (schema {schema_type.value}): {where}: value {data[:60]!r} "
                f"is not valid {schema_type.value}: {cause}"
            )
            raise PayloadError(msg) from exc
    return [data for _, data in values]


def _avro_values(values: list[tuple[str, bytes]], sender: Producer) -> list[bytes]:
    """An avro topic's values, each given as a JSON object, encoded with the topic's schema."""
    from sparkfn.api.errors import PayloadError

    encoded = []
    for where, data in values:
        try:
            record = json.loads(data)
        except ValueError as exc:
            msg = (
                f"topic {sender.topic.name} (schema avro): {where}: value {data[:60]!r} "
                f"is not a JSON object to encode: {exc}"
            )
            raise PayloadError(msg) from None
        try:
            encoded.append(sender.encode([record])[0].value or b"")
        except PayloadError as exc:
            msg = f"{where}: {exc}"
            raise PayloadError(msg) from exc
    return encoded


def produce(
    ctx: typer.Context,
    topic: TopicArgument,
    message: Annotated[
        list[str] | None,
        typer.Option(
            "--message",
            "-m",
            "--messages",
            metavar="VALUE",
            help="A message value; repeatable.",
        ),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file",
            metavar="PATH",
            help="Read one message per line from PATH, or from stdin when PATH is '-'. "
            "Empty lines are skipped.",
        ),
    ] = None,
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="Message key (routes to a partition).")
    ] = None,
    properties: Annotated[
        list[str] | None,
        typer.Option("--property", metavar="KEY=VALUE", help="A message property; repeatable."),
    ] = None,
    event_time: Annotated[
        datetime | None,
        typer.Option(
            "--event-time",
            parser=parse_event_time,
            metavar="ISO-TIME",
            help="Event time, ISO 8601 (UTC unless an offset is given).",
        ),
    ] = None,
    producer: Annotated[
        str | None,
        typer.Option("--producer", help="Producer name; with --sequence-id, de-duplicates."),
    ] = None,
    sequence_id: Annotated[
        int | None,
        typer.Option(
            "--sequence-id",
            min=0,
            help="Sequence id of the first message (the next get +1, +2, ...). A message "
            "whose id is not above the producer's last one is dropped as a duplicate.",
        ),
    ] = None,
    partition: Annotated[
        int | None,
        typer.Option("--partition", help="Append to this partition instead of routing."),
    ] = None,
    json_output: Annotated[
        bool,
        typer.Option("--json", help="Print the ids as a JSON list (null for a duplicate)."),
    ] = False,
    num_produce: Annotated[
        int,
        typer.Option(
            "--num-produce", "-n", min=1, help="Send the messages this many times, as Pulsar's."
        ),
    ] = 1,
) -> None:
    """Append messages to a topic in one atomic append; prints their message ids.

    Values are checked against the topic's schema type first: if any is
    invalid, nothing is appended.
    """
    from sparkfn.topics.autocreate import TopicCreation, ensure_topic
    from sparkfn.topics.message import Message
    from sparkfn.topics.producer import Producer

    if (message is None) == (file is None):
        msg = "give the messages with -m/--message (repeatable) or --file PATH ('-' for stdin)"
        raise typer.BadParameter(msg, param_hint="'--message' / '--file'")
    props = parse_properties(properties or [])
    _check_name(producer, "--producer")
    if sequence_id is not None and producer is None:
        msg = "needs --producer: de-duplication is per named producer"
        raise typer.BadParameter(msg, param_hint="'--sequence-id'")

    with open_store(ctx) as store:
        ensure_topic(store, topic, TopicCreation.read(store))  # created on first use, as Pulsar's
        sender = Producer(store, topic, name=producer)
        name = str(sender.topic.name)
        raw: list[tuple[str, bytes]] = []
        if message is not None:
            raw = [(f"--message {n}", value.encode()) for n, value in enumerate(message, 1)]
        elif file is not None:
            where, lines = _read_lines(file)
            raw = [(f"{where} line {n}", line) for n, line in lines]
        raw = raw * num_produce
        if sender.topic.schema_type.value == "avro":
            values = _avro_values(raw, sender)
        else:
            values = _checked(raw, sender.topic.schema_type, name)
        batch = [
            Message(
                value=value,
                key=key,
                properties=props,
                event_time=event_time,
                sequence_id=None if sequence_id is None else sequence_id + index,
            )
            for index, value in enumerate(values)
        ]
        ids = sender.send_batch(batch, partition=partition) if batch else []
    if json_output:
        emit_json(ids)
    else:
        for message_id in ids:
            if message_id is not None:
                sys.stdout.write(message_id + "\n")
        sys.stdout.flush()
    produced = sum(1 for i in ids if i is not None)
    dropped = len(ids) - produced
    note = f", dropped {dropped} duplicate(s)" if dropped else ""
    sys.stderr.write(f"produced {produced} message(s) to {name}{note}\n")


def _shown_value(value: bytes | None, schema_type: SchemaType) -> str:
    if value is None:
        return ""
    if schema_type.value != "bytes":
        return value.decode("utf-8", errors="replace")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + value.hex()
    return text if text.isprintable() else "0x" + value.hex()


def _message_table(messages: list[ReceivedMessage], schema_type: SchemaType) -> Table:
    """ID, value and publish time; key, properties and event time only when some have them."""
    optional = {
        "KEY": any(m.key is not None for m in messages),
        "PROPERTIES": any(m.properties for m in messages),
        "EVENT TIME (UTC)": any(m.event_time is not None for m in messages),
    }
    table = Table()
    table.add_column("ID", no_wrap=True)
    for title in ("KEY", "VALUE", "PROPERTIES", "EVENT TIME (UTC)", "PUBLISH TIME (UTC)"):
        if optional.get(title, True):
            # Fold rather than cut: a table must not hide part of a value.
            table.add_column(title, overflow="fold")
    for m in messages:
        cells: dict[str, Text] = {
            "KEY": Text(m.key or ""),
            "VALUE": Text(_shown_value(m.value, schema_type)),
            "PROPERTIES": Text(", ".join(f"{k}={v}" for k, v in sorted(m.properties.items()))),
            "EVENT TIME (UTC)": Text(format_time(m.event_time) if m.event_time else ""),
            "PUBLISH TIME (UTC)": Text(format_time(m.publish_time)),
        }
        table.add_row(
            m.message_id, *(cell for title, cell in cells.items() if optional.get(title, True))
        )
    return table


def consume(
    ctx: typer.Context,
    topic: TopicArgument,
    subscription: Annotated[
        str | None,
        typer.Option(
            "--subscription",
            "-s",
            "--subscription-name",
            help="Durable subscription: resume where it was last acknowledged, and "
            "acknowledge what is printed.",
        ),
    ] = None,
    position: Annotated[
        PositionName,
        typer.Option(
            "--position",
            help="Where a reader or a new subscription starts.",
        ),
    ] = "earliest",
    num: Annotated[
        int | None,
        typer.Option(
            "--num",
            "-n",
            "--num-messages",
            min=0,
            help="Stop after this many messages; 0 keeps waiting for more, as --follow.",
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep waiting for new messages until Ctrl+C."),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per message and line.")
    ] = False,
) -> None:
    """Print messages of a topic.

    Without --follow, stops when it has caught up with the topic (or after
    --num messages). With --subscription, each printed batch is acknowledged,
    so the next run continues after it.
    """
    from sparkfn.topics.autocreate import TopicCreation, ensure_topic
    from sparkfn.topics.consumer import Consumer

    _check_name(subscription, "--subscription")
    if num == 0:  # Pulsar's: listen indefinitely
        num, follow = None, True
    with open_store(ctx) as store:
        ensure_topic(store, topic, TopicCreation.read(store))  # as Pulsar's subscribe creates it
        consumer = Consumer(store, topic, subscription=subscription, initial_position=position)
        schema_type = consumer.topic.schema_type
        out = console()
        pending: list[ReceivedMessage] = []

        def show(messages: list[ReceivedMessage]) -> None:
            if json_output:
                for m in messages:
                    shown = m.as_json(schema_type, consumer.topic.schema_definition)
                    sys.stdout.write(json.dumps(shown) + "\n")
                sys.stdout.flush()
            else:
                out.print(_message_table(messages, schema_type))
            if subscription is not None:
                consumer.acknowledge()

        remaining = num
        try:
            while remaining is None or remaining > 0:
                limit = CONSUME_BATCH if remaining is None else min(CONSUME_BATCH, remaining)
                batch = consumer.receive(limit, timeout=FOLLOW_POLL_SECONDS if follow else 0.0)
                if remaining is not None:
                    remaining -= len(batch)
                if not batch:
                    if follow:
                        continue
                    break
                if json_output or follow:
                    show(batch)
                else:
                    # One table for the whole run, acknowledged once it is printed.
                    pending.extend(batch)
            if pending:
                show(pending)
        except KeyboardInterrupt:
            if not follow:
                raise
            # Ctrl+C is how --follow ends. Printed batches were acknowledged
            # already; one cut short is delivered again next time.
            return
        if not json_output and not pending and not follow:
            sys.stderr.write(f"no messages in {consumer.topic.name} at this position\n")
