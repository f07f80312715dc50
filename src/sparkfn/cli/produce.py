"""``sparkfn topics produce``: writing messages to a topic, as ``pulsar-client produce`` does.

::

    sparkfn topics produce orders -m "a,b"                  # two messages, as Pulsar's
    sparkfn topics produce orders -m '{"id": 1}' -s '|' -p source=cli,team=ops
    sparkfn topics produce orders -f order-1.json,order-2.json   # a file is one message
    sparkfn topics produce orders --file - < orders.jsonl   # sparkfn's: one per line

The command is registered on ``sparkfn topics`` by :mod:`sparkfn.cli.topics`.
The topic modules (pyarrow) are imported inside the command.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sparkfn.cli.context import emit_json, note, open_store
from sparkfn.cli.messages import _check_name
from sparkfn.cli.options import TopicArgument
from sparkfn.cli.params import parse_event_time, parse_properties

if TYPE_CHECKING:
    from sparkfn.topics.message import SchemaType
    from sparkfn.topics.producer import Producer


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


def _split(given: str, separator: str) -> list[str]:
    """``-m``'s text split as Pulsar's is (``String.split``: trailing empty parts dropped)."""
    parts = given.split(separator)
    while len(parts) > 1 and not parts[-1]:
        parts.pop()
    return parts


def _read_files(given: list[str]) -> list[tuple[str, bytes]]:
    """``-f``'s files, comma-separated: each file's whole content is one message."""
    read = []
    for path in (part for item in given for part in item.split(",") if part):
        try:
            read.append((f"file {path}", Path(path).read_bytes()))
        except OSError as exc:
            msg = f"cannot read {path!r}: {exc.strerror or exc}"
            raise typer.BadParameter(msg, param_hint="'--files'") from exc
    return read


def _schema_type(value_schema: str | None) -> str:
    """``-vs``'s schema type (``""`` when not given)."""
    if value_schema is None:
        return ""
    kind = value_schema.partition(":")[0].strip().lower()
    if kind not in ("bytes", "string", "json", "avro"):
        msg = f"bytes, string, json:DEFINITION or avro:DEFINITION (got {value_schema!r})"
        raise typer.BadParameter(msg, param_hint="'--value-schema'")
    return kind


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
            metavar="VALUES",
            help="Message values split on the --separator (a comma), as Pulsar's; repeatable.",
        ),
    ] = None,
    separator: Annotated[
        str,
        typer.Option("--separator", "-s", help="What -m's values are split on, as Pulsar's."),
    ] = ",",
    files: Annotated[
        list[str] | None,
        typer.Option(
            "--files",
            "-f",
            metavar="PATHS",
            help="Files, comma-separated: each file's content is one message, as Pulsar's.",
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
    pulsar_properties: Annotated[
        list[str] | None,
        typer.Option(
            "--properties",
            "-p",
            metavar="K=V,K=V",
            help="Message properties, comma-separated, as Pulsar's; repeatable.",
        ),
    ] = None,
    value_schema: Annotated[
        str | None,
        typer.Option(
            "--value-schema",
            "-vs",
            metavar="TYPE",
            help="Pulsar's: bytes, string, json:DEF or avro:DEF. The topic's schema decides; "
            "a topic created here gets this type.",
        ),
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
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.topics.autocreate import TopicCreation, ensure_topic
    from sparkfn.topics.message import Message, SchemaType
    from sparkfn.topics.producer import Producer

    if (message is None) + (file is None) + (files is None) != 2:
        msg = (
            "give the messages with -m/--messages (repeatable), -f/--files PATHS or "
            "--file PATH ('-' for stdin), one of them"
        )
        raise typer.BadParameter(msg, param_hint="'--message' / '--files' / '--file'")
    if not separator:
        msg = "must not be empty"
        raise typer.BadParameter(msg, param_hint="'--separator'")
    props = parse_properties(properties or [])
    props |= parse_properties(
        [item for given in pulsar_properties or [] for item in given.split(",") if item],
        "--properties",
    )
    schema = _schema_type(value_schema)
    _check_name(producer, "--producer")
    if sequence_id is not None and producer is None:
        msg = "needs --producer: de-duplication is per named producer"
        raise typer.BadParameter(msg, param_hint="'--sequence-id'")

    with open_store(ctx) as store:
        # Created on first use, as Pulsar's, with the -vs type if one is given (an avro
        # topic needs its schema given to `topics create`).
        creation = TopicCreation.read(store)
        if schema in ("bytes", "string", "json"):
            creation = replace(creation, schema_type=SchemaType(schema))
        named = TopicAdmin(store).partition_by_name(topic)  # Pulsar's <topic>-partition-<n>
        if named is not None:
            if partition not in (None, named[1]):
                msg = f"{topic} names partition {named[1]}; --partition says {partition}"
                raise typer.BadParameter(msg, param_hint="'--partition'")
            topic, partition = str(named[0].name), named[1]
        else:
            ensure_topic(store, topic, creation)
        sender = Producer(store, topic, name=producer)
        name = str(sender.topic.name)
        if schema and schema != sender.topic.schema_type.value:
            note(
                f"warning: --value-schema {value_schema}: topic {name} has schema "
                f"{sender.topic.schema_type.value}, which decides"
            )
        raw: list[tuple[str, bytes]] = []
        if message is not None:
            texts = [part for given in message for part in _split(given, separator)]
            raw = [(f"--messages value {n}", text.encode()) for n, text in enumerate(texts, 1)]
        elif files is not None:
            raw = _read_files(files)
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
    duplicates = f", dropped {dropped} duplicate(s)" if dropped else ""
    sys.stderr.write(f"produced {produced} message(s) to {name}{duplicates}\n")
