"""``sparkfn topics consume``: reading messages of a topic (``produce`` is :mod:`.produce`).

::

    sparkfn topics consume orders -s audit -n 10 --json
    sparkfn topics consume orders -s audit -p Earliest
    sparkfn topics consume orders --follow

The command is registered on ``sparkfn topics`` by :mod:`sparkfn.cli.topics`,
next to the admin commands. ``consume --json`` prints one JSON object per line.
The topic modules (pyarrow) are imported inside the command.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.table import Table
from rich.text import Text

from sparkfn.cli.context import console, open_store
from sparkfn.cli.options import TopicArgument
from sparkfn.cli.params import format_time

if TYPE_CHECKING:
    from sparkfn.topics.message import ReceivedMessage, SchemaType

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


def _position(given: str | None, subscription: str | None) -> PositionName:
    """``-p``'s position, Pulsar's spelling too; by default latest for a subscription (as
    Pulsar's ``consume``), earliest for a reader."""
    if given is None:
        return "latest" if subscription is not None else "earliest"
    value = given.strip().lower()
    if value not in ("earliest", "latest"):
        msg = f"Latest or Earliest (got {given!r})"
        raise typer.BadParameter(msg, param_hint="'--position'")
    return "latest" if value == "latest" else "earliest"


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
        str | None,
        typer.Option(
            "--position",
            "-p",
            "--subscription-position",
            metavar="POSITION",
            help="Where a new subscription starts: Latest (its default, as Pulsar's) or "
            "Earliest; a reader (no --subscription) starts at earliest unless told.",
        ),
    ] = None,
    num: Annotated[
        int | None,
        typer.Option(
            "--num",
            "-n",
            "--num-messages",
            min=0,
            help="Wait for this many messages, then stop, as Pulsar's; 0 keeps waiting for "
            "more, as --follow.",
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

    With --num N, waits until N messages came, as Pulsar's consume does.
    Without --num or --follow, stops when it has caught up with the topic.
    With --subscription, each printed batch is acknowledged, so the next run
    continues after it; a new subscription starts at the latest message
    unless -p Earliest.
    """
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.topics.autocreate import TopicCreation, ensure_topic
    from sparkfn.topics.consumer import Consumer

    _check_name(subscription, "--subscription")
    start = _position(position, subscription)
    if num == 0:  # Pulsar's: listen indefinitely
        num, follow = None, True
    waits = follow or num is not None  # Pulsar's consume waits for its messages
    with open_store(ctx) as store:
        only: list[int] | None = None
        named = TopicAdmin(store).partition_by_name(topic)  # Pulsar's <topic>-partition-<n>
        if named is not None:
            topic, only = str(named[0].name), [named[1]]
        else:
            ensure_topic(store, topic, TopicCreation.read(store))  # as Pulsar's subscribe does
        consumer = Consumer(
            store, topic, subscription=subscription, initial_position=start, partitions=only
        )
        schema_type = consumer.topic.schema_type
        out = console()
        pending: list[ReceivedMessage] = []

        def show(messages: list[ReceivedMessage]) -> None:
            # Printed and acknowledged as one step: a Ctrl+C meanwhile ends the
            # command right after it, never between the two (what was printed
            # would be delivered again).
            with _sigint_deferred():
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
                batch = consumer.receive(limit, timeout=FOLLOW_POLL_SECONDS if waits else 0.0)
                if remaining is not None:
                    remaining -= len(batch)
                if not batch:
                    if waits:
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
            if not waits:
                raise
            if pending:  # what came before Ctrl+C is shown, and acknowledged
                show(pending)
            # Ctrl+C is how --follow ends. Printed batches were acknowledged
            # already; one cut short is delivered again next time.
            return
        if not json_output and not pending and not follow:
            sys.stderr.write(f"no messages in {consumer.topic.name} at this position\n")


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """A Ctrl+C meanwhile (on the main thread) is raised when the block ends, not inside it.

    A handler that only notes it, not a signal mask: the process has other
    threads, and the kernel hands a SIGINT to any thread that does not block it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if caught:
        raise KeyboardInterrupt
