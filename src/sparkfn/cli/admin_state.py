"""``sparkfn functions querystate|putstate|trigger``: a worker's function's state, and one value through it.

::

    sparkfn functions querystate --name wordcount --key hello             # pulsar-admin's JSON
    sparkfn functions querystate --name wordcount -k hello -w -o table    # each change, until Ctrl+C
    sparkfn functions putstate --name wordcount --key greeting --value hi
    sparkfn functions putstate --name wordcount -s '{"key": "hello", "byteValue": "aGk="}'
    sparkfn functions trigger --name exclaim --trigger-value hello        # prints hello!

A state value is Pulsar's ``FunctionState``: ``key``, ``stringValue``,
``byteValue`` (base64) and ``numberValue`` (a counter). ``trigger`` sends one
value to the function's input (``--topic`` picks one of several) and prints
the output the function produced from it.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from sparkfn.api.errors import NotFoundError
from sparkfn.cli.admin_client import (
    CONNECTION,
    CONNECTION_PULSAR,
    TARGET,
    Call,
    changes,
    option,
    part,
    show,
    switch,
)
from sparkfn.cli.context import note
from sparkfn.cli.flags import takes

KEY = option("--key", "The state key.", "KEY", aliases=("-k",))
FOLLOW = switch(
    "--watch", "-w", "Follow the key: print its value each time it changes, until Ctrl+C."
)
VALUE = option("--value", "The value to store under --key, as text.", "TEXT")
STATE = option(
    "--state",
    'A FunctionState as JSON: {"key": ..., "stringValue", "byteValue" (base64) or "numberValue"}.',
    "JSON",
    aliases=("-s",),
)
TRIGGER_VALUE = option("--trigger-value", "The value to send, as text.", "TEXT")
TRIGGER_FILE = option(
    "--trigger-file", "A file whose bytes are the value to send.", "PATH", Path | None
)
TOPIC = option("--topic", "The input to send it to (when the function has several).", "TOPIC")
TRIGGER_TIMEOUT = option(
    "--timeout", "Seconds to wait for the output.", "SECONDS", float, 30.0, min=0.1, max=300.0
)


def _needs_key(key: str | None) -> str:
    if not key:
        msg = "which key? Give --key"
        raise typer.BadParameter(msg, param_hint="--key")
    return key


def _state_text(state: dict[str, Any]) -> str:
    """A FunctionState for people: its text, counter or base64 bytes."""
    shown = []
    if state.get("stringValue") is not None:
        shown.append(json.dumps(state["stringValue"]))
    elif state.get("byteValue") is not None:
        shown.append(f"bytes (base64) {state['byteValue']}")
    if state.get("numberValue") is not None:
        shown.append(f"counter {state['numberValue']}")
    return f"{state['key']} = {', '.join(shown) or '(empty)'}"


def querystate(
    ctx: typer.Context, fields: dict[str, Any], *, key: str | None, watch: bool, **given: Any
) -> None:
    """Show the value of a function's state key (with --watch, each change of it)."""
    call = Call.of(given)
    path = f"{call.path}/state/{part(_needs_key(key))}"
    with call.client() as client:
        if not watch:
            show(call, client.json("GET", path), _state_text)
            return
        client.request("GET", call.path)  # the function exists: a missing key is one to wait for

        def fetch() -> Any:
            try:
                return client.json("GET", path)
            except NotFoundError:
                return None

        try:
            for state in changes(fetch):
                if state is None:
                    note(f"function {call.fqfn} has no value under key {key!r} yet; waiting")
                elif call.json:
                    show(call, state, _state_text)
                else:
                    stamp = datetime.now().strftime("%H:%M:%S")
                    typer.echo(f"{stamp} {_state_text(state)}")
        except KeyboardInterrupt:
            return  # Ctrl+C is how a watch ends


def putstate(
    ctx: typer.Context,
    fields: dict[str, Any],
    *,
    key: str | None,
    value: str | None,
    state: str | None,
    **given: Any,
) -> None:
    """Store a value under a function's state key: --key with --value, or --state."""
    call = Call.of(given)
    if (value is None) == (state is None):
        msg = "give the value as --value TEXT (with --key) or as --state JSON, one of them"
        raise typer.BadParameter(msg, param_hint="--value")
    if state is not None:
        try:
            document = json.loads(state)
        except ValueError as exc:
            msg = f"not JSON: {exc}"
            raise typer.BadParameter(msg, param_hint="--state") from None
        if not isinstance(document, dict):
            msg = "a FunctionState is a JSON object"
            raise typer.BadParameter(msg, param_hint="--state")
        key = key or document.get("key")
        document["key"] = _needs_key(key)
    else:
        document = {"key": _needs_key(key), "stringValue": value}
    path = f"{call.path}/state/{part(document['key'])}"
    with call.client() as client:
        stored = client.json("POST", path, files={"state": (None, json.dumps(document))})
    show(call, stored, lambda stored: f"stored {_state_text(stored)}")


def trigger(
    ctx: typer.Context,
    fields: dict[str, Any],
    *,
    trigger_value: str | None,
    trigger_file: Path | None,
    topic: str | None,
    timeout: float,
    **given: Any,
) -> None:
    """Send one value to a running function's input and print the output it gave."""
    call = Call.of(given)
    if (trigger_value is None) == (trigger_file is None):
        msg = "give the value as --trigger-value TEXT or --trigger-file PATH, one of them"
        raise typer.BadParameter(msg, param_hint="--trigger-value")
    form: dict[str, Any] = {"timeout": (None, f"{timeout:g}")}
    if topic:
        form["topic"] = (None, topic)
    if trigger_file is not None:
        try:
            form["dataStream"] = (trigger_file.name, trigger_file.read_bytes())
        except OSError as exc:
            msg = f"cannot read {trigger_file}: {exc.strerror or exc}"
            raise typer.BadParameter(msg, param_hint="--trigger-file") from None
    else:
        form["data"] = (None, trigger_value)
    # The worker waits up to `timeout` for the output; the request may take that and more.
    with call.client(timeout=timeout + 60) as client:
        result = client.json("POST", f"{call.path}/trigger", files=form)

    def shown(result: dict[str, Any]) -> str:
        value = result["output"]["value"]
        if value is None:
            return f"(bytes, base64) {result['output']['valueBase64']}"
        return value if isinstance(value, str) else json.dumps(value)

    show(call, result, shown)


def add_commands(app: typer.Typer) -> None:
    """Add ``querystate``, ``putstate`` and ``trigger`` to the ``functions`` group ``app``."""
    # querystate prints the FunctionState as pulsar-admin does (indented JSON) unless told otherwise.
    app.command("querystate")(
        takes("function", (*TARGET, KEY, FOLLOW, *CONNECTION_PULSAR))(querystate)
    )
    app.command("putstate")(takes("function", (*TARGET, KEY, VALUE, STATE, *CONNECTION))(putstate))
    trigger_flags = (*TARGET, TRIGGER_VALUE, TRIGGER_FILE, TOPIC, TRIGGER_TIMEOUT, *CONNECTION)
    app.command("trigger")(takes("function", trigger_flags)(trigger))
