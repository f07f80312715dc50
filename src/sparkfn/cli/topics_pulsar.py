"""``sparkfn topics`` commands as ``pulsar-admin topics`` has them, on the store.

::

    sparkfn topics create-partitioned-topic persistent://public/default/orders -p 4
    sparkfn topics list public/default
    sparkfn topics stats persistent://public/default/orders
    sparkfn topics partitioned-stats persistent://public/default/orders --per-partition
    sparkfn topics subscriptions persistent://public/default/orders
    sparkfn topics peek-messages persistent://public/default/orders -s public/default/f -n 2
    sparkfn topics reset-cursor persistent://public/default/orders -s public/default/f -t 1h

They print what pulsar-admin prints: names one a line, stats as indented
JSON (the worker's ``/admin/v2/persistent/.../stats`` body), peeked messages
with their id, times, properties and a hex dump. ``reset-cursor`` is how a
function's subscription is rewound (to a time or a message id); it is
refused while the function runs: stop it, reset, start it.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sparkfn.cli.context import open_store
from sparkfn.cli.options import TopicArgument
from sparkfn.cli.params import parse_duration

if TYPE_CHECKING:
    from sparkfn.topics.message import ReceivedMessage

SubscriptionOption = Annotated[
    str,
    typer.Option("--subscription", "-s", help="The subscription's name.", show_default=False),
]


def _lines(items: list[str]) -> None:
    sys.stdout.write("".join(f"{item}\n" for item in items))


def _indented(body: Any) -> None:
    sys.stdout.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")


def add_commands(app: typer.Typer) -> None:
    """Add Pulsar's topic admin commands to the ``topics`` group ``app``."""
    app.command("create-partitioned-topic")(create_partitioned_topic)
    app.command("list-partitioned-topics")(list_partitioned_topics)
    app.command("stats")(stats)
    app.command("partitioned-stats")(partitioned_stats)
    app.command("subscriptions")(subscriptions)
    app.command("peek-messages")(peek_messages)
    app.command("reset-cursor")(reset_cursor)


def create_partitioned_topic(
    ctx: typer.Context,
    topic: TopicArgument,
    partitions: Annotated[
        int,
        typer.Option("--partitions", "-p", help="Number of partitions (1 to 1024).", min=1),
    ],
) -> None:
    """Create a topic of N partitions (pulsar-admin's create-partitioned-topic)."""
    from sparkfn.topics.admin import TopicAdmin

    with open_store(ctx) as store:
        TopicAdmin(store).create(topic, partitions=partitions)


def list_partitioned_topics(
    ctx: typer.Context,
    namespace: Annotated[str, typer.Argument(metavar="TENANT/NAMESPACE", show_default=False)],
) -> None:
    """List the namespace's topics of more than one partition, one a line."""
    from sparkfn.topics.admin import TopicAdmin

    tenant, space = namespace_parts(namespace)
    with open_store(ctx) as store:
        topics = TopicAdmin(store).list(tenant=tenant, namespace=space)
    _lines([f"persistent://{t.name}" for t in topics if t.partitions > 1])


def namespace_parts(text: str) -> tuple[str, str]:
    """``tenant/namespace`` as its two names; a clear error for anything else."""
    from sparkfn.config.names import TopicName

    tenant, _, namespace = text.strip().partition("/")
    if not namespace or "/" in namespace:
        msg = f"{text!r} is not a namespace: give it as tenant/namespace (public/default)"
        raise typer.BadParameter(msg, param_hint="'TENANT/NAMESPACE'")
    TopicName.parse(f"{tenant}/{namespace}/x", field="namespace")  # the names' own rules
    return tenant, namespace


def pulsar_names(topics: list[Any]) -> list[str]:
    """Topics as pulsar-admin's ``topics list`` prints them: a one-partition topic by
    its name, a partitioned one by each partition's ``<name>-partition-<n>``."""
    names: list[str] = []
    for info in topics:
        base = f"persistent://{info.name}"
        if info.partitions == 1:
            names.append(base)
        else:
            names.extend(f"{base}-partition-{n}" for n in range(info.partitions))
    return names


def stats(ctx: typer.Context, topic: TopicArgument) -> None:
    """Print the topic's stats as Pulsar's TopicStats JSON: counts, size, and each
    subscription's backlog."""
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.worker.api.topic_models import TopicStats

    with open_store(ctx) as store:
        admin = TopicAdmin(store)
        info = admin.get(topic)
        body = TopicStats.of(info, admin.stats(info.name), admin.subscriptions(info.name))
    _indented(body.model_dump(mode="json", by_alias=True))


def partitioned_stats(
    ctx: typer.Context,
    topic: TopicArgument,
    per_partition: Annotated[
        bool, typer.Option("--per-partition", help="Each partition's stats too.")
    ] = False,
) -> None:
    """Print the topic's stats as Pulsar's PartitionedTopicStats JSON: the whole topic's,
    and with --per-partition each partition's under ``partitions`` (pulsar-admin's)."""
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.worker.api.topic_models import PartitionedTopicStats

    with open_store(ctx) as store:
        admin = TopicAdmin(store)
        info = admin.get(topic)
        body = PartitionedTopicStats.of_partitions(
            info, admin.stats(info.name), admin.subscriptions(info.name)
        )
    found = body.model_dump(mode="json", by_alias=True)
    if not per_partition:
        found["partitions"] = {}
    _indented(found)


def subscriptions(ctx: typer.Context, topic: TopicArgument) -> None:
    """List the topic's subscriptions, one a line (a function's is named
    tenant/namespace/name unless it was given --subs-name)."""
    from sparkfn.topics.admin import TopicAdmin

    with open_store(ctx) as store:
        _lines(list(TopicAdmin(store).subscriptions(topic)))


def peek_messages(
    ctx: typer.Context,
    topic: TopicArgument,
    subscription: SubscriptionOption,
    count: Annotated[
        int, typer.Option("--count", "-n", help="How many messages to show.", min=1, max=10_000)
    ] = 1,
) -> None:
    """Show the next messages of a subscription without moving its cursor."""
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.topics.subscription.reset import peek

    with open_store(ctx) as store:
        info = TopicAdmin(store).get(topic)
        found = peek(store, info, subscription, count)
    for message in found:
        sys.stdout.write(_peeked(message))


def _peeked(message: ReceivedMessage) -> str:
    """One message as pulsar-admin's peek-messages prints it: its id, times, key,
    properties, then its value as a hex dump."""
    lines = [f"Message ID: {message.message_id}"]
    lines.append(f"Publish time: {int(message.publish_time.timestamp() * 1000)}")
    event = message.event_time
    lines.append(f"Event time: {0 if event is None else int(event.timestamp() * 1000)}")
    if message.key is not None:
        lines.append(f"Key: {message.key}")
    if message.properties:
        lines.append("Properties:")
        lines.append(json.dumps(message.properties, indent=2, ensure_ascii=False))
    lines.append(hex_dump(message.value or b""))
    return "\n".join(lines) + "\n"


def hex_dump(data: bytes) -> str:
    """``data`` in a box of 16 bytes a row, hex then printable ASCII (``.`` for others).

    >>> print(hex_dump(b"hi"))  # doctest: +NORMALIZE_WHITESPACE
             +-------------------------------------------------+
             |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |
    +--------+-------------------------------------------------+----------------+
    |00000000| 68 69                                           |hi              |
    +--------+-------------------------------------------------+----------------+
    """
    rule = "+--------+" + "-" * 49 + "+" + "-" * 16 + "+"
    head = (
        " " * 9
        + "+"
        + "-" * 49
        + "+\n"
        + " " * 9
        + "|"
        + "".join(f"  {n:x}" for n in range(16))
        + " |"
    )
    rows = [head, rule]
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        hexes = "".join(f" {b:02x}" for b in chunk).ljust(48)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk).ljust(16)
        rows.append(f"|{start:08x}|{hexes} |{text}|")
    rows.append(rule)
    return "\n".join(rows)


def reset_cursor(
    ctx: typer.Context,
    topic: TopicArgument,
    subscription: SubscriptionOption,
    time: Annotated[
        timedelta | None,
        typer.Option(
            "--time",
            "-t",
            parser=parse_duration,
            metavar="DURATION",
            help="Go back this long from now: 30s, 10m, 2h, 1d.",
        ),
    ] = None,
    message_id: Annotated[
        str | None,
        typer.Option(
            "--messageId",
            "-m",
            "--message-id",
            help="earliest, latest, or partition:offset (that message comes next).",
        ),
    ] = None,
    exclude: Annotated[
        bool,
        typer.Option(
            "--exclude-message", "-e", help="With -m partition:offset: the message after it."
        ),
    ] = False,
) -> None:
    """Move a subscription's cursors to a time or a message id, to read again (or skip).

    Refused while a running function or sink reads the subscription: stop it
    (functions stop), reset the cursor, start it.
    """
    from sparkfn.runtime.lifecycle.control import live_state
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.topics.subscription.reset import offsets_at, offsets_of_id, reset_cursors

    if (time is None) == (message_id is None):
        msg = "give one of --time (-t) and --messageId (-m)"
        raise typer.BadParameter(msg, param_hint="'--time' / '--messageId'")
    with open_store(ctx) as store:
        info = TopicAdmin(store).get(topic)
        if time is not None:
            wanted = offsets_at(store, info, datetime.now(UTC) - time)
        else:
            assert message_id is not None
            wanted = offsets_of_id(store, info, message_id, exclude)
        with store.write() as conn:
            reset_cursors(conn, subscription, info, wanted, live_run=live_state)
