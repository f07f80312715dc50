"""``sparkfn topics``: create, inspect, produce to and consume from embedded topics.

::

    sparkfn topics create orders -p 4 --schema-type json --retention 7d
    sparkfn topics produce orders -m '{"id": 1}' -m '{"id": 2}' --key alice
    sparkfn topics produce orders --file - < orders.jsonl
    sparkfn topics consume orders -s audit -n 10 --json
    sparkfn topics consume orders --follow
    sparkfn topics unsubscribe orders -s audit

Machine output: ``--json`` on ``list``, ``describe``, ``produce``,
``consume`` and ``maintain``; ``consume --json`` prints one JSON object per
line. Tables are for people.

The admin commands (``create``, ``list``, ``describe``, ``delete``,
``unsubscribe``, ``maintain``) are here; ``produce`` and ``consume`` are in
:mod:`sparkfn.cli.messages` and :mod:`sparkfn.cli.produce`. The store and the topic modules (SQLAlchemy,
pyarrow) are imported inside the commands, never pyspark, so the command
starts quickly.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.table import Table

from sparkfn.api.errors import ConfigError
from sparkfn.cli.context import console, emit_json, open_store, report_error
from sparkfn.cli.messages import consume
from sparkfn.cli.options import TopicArgument
from sparkfn.cli.params import (
    as_utc,
    format_duration_ms,
    format_size,
    format_time,
    parse_duration,
    parse_size,
)
from sparkfn.cli.produce import produce
from sparkfn.cli.topics_pulsar import add_commands

if TYPE_CHECKING:
    from sparkfn.topics.admin import PartitionStats, TopicInfo

topics_app = typer.Typer(
    name="topics",
    help="Create, inspect, produce to and consume from topics.",
    no_args_is_help=True,
)

# The values of sparkfn.topics.message.SchemaType, spelled out so that the
# help does not import pyarrow; a test keeps the two equal.
SchemaTypeName = Literal["bytes", "string", "json", "avro"]

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _topic_json(info: TopicInfo) -> dict[str, Any]:
    return {
        "topic": str(info.name),
        "partitions": info.partitions,
        "schema_type": info.schema_type.value,
        "retention_ms": info.retention_ms,
        "retention_bytes": info.retention_bytes,
        "created_at": as_utc(info.created_at).isoformat(),
    }


@topics_app.command("create")
def create(
    ctx: typer.Context,
    topic: TopicArgument,
    partitions: Annotated[
        int, typer.Option("--partitions", "-p", help="Number of partitions (1 to 1024).")
    ] = 1,
    schema_type: Annotated[
        SchemaTypeName,
        typer.Option("--schema-type", help="How values are checked and decoded."),
    ] = "bytes",
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            metavar="AVRO_SCHEMA",
            help="For --schema-type avro: the Avro record schema as JSON, or @FILE to read it.",
        ),
    ] = None,
    retention: Annotated[
        timedelta | None,
        typer.Option(
            "--retention",
            parser=parse_duration,
            metavar="DURATION",
            help="Delete messages older than this: 45s, 30m, 12h, 7d, 1h30m (default: keep).",
        ),
    ] = None,
    retention_size: Annotated[
        int | None,
        typer.Option(
            "--retention-size",
            parser=parse_size,
            metavar="SIZE",
            help="Delete the oldest segments while a partition holds more than this: "
            "100MB, 1GB (powers of 1024; default: no limit).",
        ),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Create a topic."""
    from sparkfn.topics.admin import TopicAdmin

    with open_store(ctx) as store:
        info = TopicAdmin(store).create(
            topic,
            partitions=partitions,
            schema_type=schema_type,
            retention=retention,
            retention_bytes=retention_size,
            schema_definition=_schema_text(schema),
        )
    if json_output:
        emit_json(_topic_json(info))
        return
    console().print(
        f"created topic {info.name} with {info.partitions} partition(s), "
        f"schema {info.schema_type.value}"
    )


def _schema_text(given: str | None) -> str | None:
    """``--schema``: the text itself, or the file named after ``@``."""
    if given is None or not given.startswith("@"):
        return given
    path = Path(given[1:]).expanduser()
    try:
        return path.read_text()
    except OSError as exc:
        msg = f"--schema {given}: cannot read {path}: {exc.strerror}"
        raise ConfigError(msg) from None


@topics_app.command("list")
def list_topics(
    ctx: typer.Context,
    in_namespace: Annotated[
        str | None,
        typer.Argument(
            metavar="[TENANT/NAMESPACE]",
            help="As pulsar-admin: this namespace's topics, one a line (a partitioned "
            "topic's partitions as NAME-partition-N).",
            show_default=False,
        ),
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant.")] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="Only this namespace.")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """List topics, sorted by name."""
    from sparkfn.cli.topics_pulsar import namespace_parts, pulsar_names
    from sparkfn.topics.admin import TopicAdmin

    if in_namespace is not None:
        tenant, namespace = namespace_parts(in_namespace)
    with open_store(ctx) as store:
        topics = TopicAdmin(store).list(tenant=tenant, namespace=namespace)
    if in_namespace is not None and not json_output:
        sys.stdout.write("".join(f"{name}\n" for name in pulsar_names(topics)))
        return
    if json_output:
        emit_json([_topic_json(info) for info in topics])
        return
    if not topics:
        sys.stderr.write("no topics\n")
        return
    table = Table("TOPIC", "PARTITIONS", "SCHEMA", "RETENTION", "RETENTION SIZE")
    for info in topics:
        table.add_row(
            str(info.name),
            str(info.partitions),
            info.schema_type.value,
            format_duration_ms(info.retention_ms),
            format_size(info.retention_bytes),
        )
    console().print(table)


def _describe_json(info: TopicInfo, stats: list[PartitionStats]) -> dict[str, Any]:
    return {
        **_topic_json(info),
        "messages": sum(s.messages for s in stats),
        "segments": sum(s.segments for s in stats),
        "size_bytes": sum(s.size_bytes for s in stats),
        "partition_stats": [
            {
                "partition": s.partition,
                "start_offset": s.start_offset,
                "end_offset": s.end_offset,
                "messages": s.messages,
                "segments": s.segments,
                "size_bytes": s.size_bytes,
            }
            for s in stats
        ],
    }


@topics_app.command("describe")
def describe(ctx: typer.Context, topic: TopicArgument, json_output: JsonOption = False) -> None:
    """Show a topic's settings and, per partition, offsets, messages, segments and size."""
    from sparkfn.topics.admin import TopicAdmin

    with open_store(ctx) as store:
        admin = TopicAdmin(store)
        info = admin.get(topic)
        stats = admin.stats(info.name)
    summary = _describe_json(info, stats)
    if json_output:
        emit_json(summary)
        return
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    for label, value in (
        ("Topic", str(info.name)),
        ("Schema type", info.schema_type.value),
        ("Partitions", str(info.partitions)),
        ("Retention", format_duration_ms(info.retention_ms)),
        ("Retention size", format_size(info.retention_bytes)),
        ("Created (UTC)", format_time(info.created_at)),
        ("Messages", str(summary["messages"])),
        ("Segments", str(summary["segments"])),
        ("Size", format_size(summary["size_bytes"])),
    ):
        header.add_row(label, value)
    table = Table("PARTITION", "START", "END", "MESSAGES", "SEGMENTS", "SIZE")
    for s in stats:
        table.add_row(
            str(s.partition),
            str(s.start_offset),
            str(s.end_offset),
            str(s.messages),
            str(s.segments),
            format_size(s.size_bytes),
        )
    out = console()
    out.print(header)
    out.print(table)


@topics_app.command("delete")
def delete(
    ctx: typer.Context,
    topic: TopicArgument,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete without asking for confirmation.")
    ] = False,
) -> None:
    """Delete a topic with its messages and subscriptions."""
    from sparkfn.topics.admin import TopicAdmin

    with open_store(ctx) as store:
        admin = TopicAdmin(store)
        info = admin.get(topic)
        if not yes:
            if sys.stdin is None or not sys.stdin.isatty():
                report_error(
                    "confirmation_required",
                    f"deleting topic {info.name} needs confirmation and stdin is not "
                    "a terminal; pass --yes to delete without asking",
                )
                raise typer.Exit(1)
            messages = sum(s.messages for s in admin.stats(info.name))
            if not typer.confirm(f"Delete topic {info.name} and its {messages} message(s)?"):
                sys.stderr.write(f"topic {info.name} was not deleted\n")
                raise typer.Exit(1)
        admin.delete(info.name)
    console().print(f"deleted topic {info.name}")


@topics_app.command("unsubscribe")
def unsubscribe(
    ctx: typer.Context,
    topic: TopicArgument,
    subscription: Annotated[
        str,
        typer.Option(
            "--subscription", "-s", help="The subscription to delete.", show_default=False
        ),
    ],
    force: Annotated[
        bool,
        typer.Option(
            "--force", "-f", help="Delete it even while a running function or sink reads it."
        ),
    ] = False,
) -> None:
    """Delete a subscription's cursors on a topic (its cursors on other topics stay).

    Refused while a running function or sink owns the subscription, unless
    --force: the run then starts it over at its initial position.
    """
    from sparkfn.runtime.lifecycle.control import live_state
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.topics.subscription import unsubscribe as unsubscribe_topic

    with open_store(ctx) as store:
        info = TopicAdmin(store).get(topic)
        with store.write() as conn:
            removed = unsubscribe_topic(conn, subscription, info, live_run=live_state, force=force)
    console().print(
        f"unsubscribed {subscription} from topic {info.name} ({removed} cursor(s) removed)"
    )


@topics_app.command("auto-creation")
def auto_creation(
    ctx: typer.Context,
    enable: Annotated[
        bool | None,
        typer.Option(
            "--enable/--disable",
            help="Create missing topics on first use (Pulsar's allowAutoTopicCreation), or not.",
            show_default=False,
        ),
    ] = None,
    partitions: Annotated[
        int | None,
        typer.Option("--partitions", "-p", help="Partitions of a topic created so (1 to 1024)."),
    ] = None,
    schema_type: Annotated[
        SchemaTypeName | None,
        typer.Option("--schema-type", help="Schema type of a topic created so (not avro)."),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Show or change the store's topic creation on first use (on: 1 partition, bytes).

    Every process on the store obeys it: functions (their inputs, output, log,
    dead-letter and publish topics), `topics produce` and workers.
    """
    from sparkfn.topics.autocreate import TopicCreation

    with open_store(ctx) as store:
        if enable is None and partitions is None and schema_type is None:
            found = TopicCreation.read(store)
        else:
            found = TopicCreation.write(
                store, enabled=enable, partitions=partitions, schema_type=schema_type
            )
    shown = {
        "allow_auto_topic_creation": found.enabled,
        "partitions": found.partitions,
        "schema_type": found.schema_type.value,
    }
    if json_output:
        emit_json(shown)
        return
    state = "on" if found.enabled else "off"
    console().print(
        f"topic creation on first use: {state} "
        f"({found.partitions} partition(s), {found.schema_type.value})"
    )


# Writing and reading messages (cli/messages.py), listed here in the help's order.
topics_app.command("produce")(produce)
topics_app.command("consume")(consume)


@topics_app.command("maintain")
def maintain(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Apply retention, compact small segments and collect garbage, on every topic."""
    from sparkfn.topics.maintenance import run_maintenance

    with open_store(ctx) as store:
        report = run_maintenance(store)
    fields = {
        "segments_deleted": report.segments_deleted,
        "messages_expired": report.messages_expired,
        "segments_merged": report.segments_merged,
        "segments_written": report.segments_written,
    }
    if json_output:
        emit_json(fields)
        return
    table = Table("RESULT", "COUNT")
    for label, value in fields.items():
        table.add_row(label.replace("_", " "), str(value))
    console().print(table)


add_commands(topics_app)  # pulsar-admin's: create-partitioned-topic, stats, reset-cursor, ...
