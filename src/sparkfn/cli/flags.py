"""How an option is declared once and taken by several commands.

A config field's option is a :class:`Flag`: its name, help, metavar, help
panel, what Typer parses and how that becomes the field's value. A command
lists the flags it takes with :func:`takes`, so one declaration serves every
command that has the field. Where commands word a help text differently, it
is given per kind of command (``function``, ``source``, ``sink``); ``{kind}``
and ``{Kind}`` in a text or a name stand for the kind. The flags themselves
are declared in :mod:`sparkfn.cli.options`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import typer

PerKind = str | Mapping[str, str]
"""One text for every kind of command, or one per kind (``function``, ``source``, ``sink``)."""

OWN_PANEL = "{Kind}"  # the panel named after the command's kind: Function, Source, Sink
INPUT_PANEL = "Input"
OUTPUT_PANEL = "Output"
PROCESSING_PANEL = "Processing"
RUN_PANEL = "Run"


def _for(text: PerKind, kind: str) -> str:
    chosen = text if isinstance(text, str) else text[kind]
    return chosen.replace("{kind}", kind).replace("{Kind}", kind.title())


@dataclass(frozen=True)
class Flag:
    """One option, declared once for every command that takes it.

    A config flag (``config=True``) gives a field of the config; the command
    gets it in ``fields``. Any other flag is a keyword argument of the
    command's own. A flag that parses to ``bool | None`` is a switch,
    ``--name/--no-name``, unset unless given.
    """

    name: str  # "--tenant"
    help: PerKind
    metavar: str | None = None
    panel: PerKind = OWN_PANEL
    parses: Any = str | None  # the type Typer parses the value into
    default: Any = None
    read: Callable[[Any], Any] | None = None  # the parsed value into the field's value
    config: bool = True
    aliases: tuple[str, ...] = ()
    dest: str = ""  # the config field or argument; default: the name in snake_case
    typer_settings: Mapping[str, Any] = field(default_factory=dict)  # min, max, envvar, ...

    @property
    def key(self) -> str:
        """The config field or the command's argument the flag gives."""
        return self.dest or self.name.lstrip("-").replace("-", "_")

    def parameter(self, kind: str) -> inspect.Parameter:
        """The flag as a keyword parameter with a ``typer.Option`` default, for ``kind``."""
        switch = self.parses == (bool | None)
        names = [_for(name, kind) for name in (self.name, *self.aliases)]
        if switch:
            names = [f"{names[0]}/--no-{names[0].removeprefix('--')}"]
        option = typer.Option(
            self.default,
            *names,
            help=_for(self.help, kind),
            rich_help_panel=_for(self.panel, kind),
            metavar=self.metavar,
            show_default=not switch,
            **self.typer_settings,
        )
        return inspect.Parameter(
            self.key, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=self.parses
        )

    def value(self, given: Any) -> Any:
        """What the command gets for the parsed value ``given``."""
        return given if self.read is None else self.read(given)


Command = Callable[..., None]


def takes(kind: str, flags: Sequence[Flag]) -> Callable[[Command], Command]:
    """Give a Typer command one option per flag, listed in the help in this order.

    The decorated function is called with the Typer context, ``fields`` (a
    dict of every config flag's value by field, ``None`` for one not given)
    and every other flag as a keyword argument. Typer reads the options from
    the wrapper's signature.
    """

    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def with_flags(ctx: typer.Context, **given: Any) -> None:
            fields = {f.key: f.value(given[f.key]) for f in flags if f.config}
            own = {f.key: f.value(given[f.key]) for f in flags if not f.config}
            command(ctx, fields, **own)

        context = inspect.Parameter(
            "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
        )
        parameters = [context, *(flag.parameter(kind) for flag in flags)]
        with_flags.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags

    return decorate
