"""What every command gets from the global options, and how it prints and reports errors.

The global ``--data-dir`` and ``--store-url`` options become a
:class:`StoreOptions` on the root Typer context; a command opens the store
with :func:`open_store`, which closes it again when the command ends. Tables
for people go through :func:`console`, JSON for programs through
:func:`emit_json`, progress lines through :func:`note` and errors through
:func:`report_error`.

Heavy modules (SQLAlchemy, pyarrow) are imported only when a command opens
the store, so ``sparkfn --help`` and usage errors stay fast.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from sparkfn.store.store import Store


@dataclass(frozen=True)
class StoreOptions:
    """The store the command line points at; ``None`` means environment, then default."""

    data_dir: Path | None = None
    store_url: str | None = None


@contextmanager
def open_store(ctx: typer.Context) -> Iterator[Store]:
    """Open the store named by the global options for the length of a command."""
    from sparkfn.store.store import Store

    options = ctx.find_object(StoreOptions) or StoreOptions()
    store = Store.open(options.store_url, options.data_dir)
    try:
        yield store
    finally:
        store.close()


def console(*, stderr: bool = False) -> Console:
    """A Rich console (on stdout, or ``stderr``) that prints every text as it is given.

    What the CLI prints is mostly users' data: topic and function names,
    state keys and values, messages, exceptions, configs. So no text is read
    as Rich markup (``[red]`` stays ``[red]``) or as an emoji code (``:four:``
    stays ``:four:``), and nothing is coloured by guesswork; styles are
    given as ``style=`` arguments, never inside a text. Every console of the
    CLI is made here.
    """
    return Console(stderr=stderr, highlight=False, markup=False, emoji=False)


def emit_json(value: Any) -> None:
    """``value`` as one line of JSON on stdout, flushed at once for a reading program."""
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def note(text: str) -> None:
    """One line on stderr, plain: stderr may be a log file, where Rich would wrap."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


_LINE_BREAKS = re.compile(r"\s*\n\s*")


def report_error(reason: str, message: str) -> None:
    """Write ``error [reason]: message`` as one line on stderr.

    Plain text, not Rich: a Rich console would wrap long messages at the
    terminal width, and scripts grep for the reason.
    """
    text = _LINE_BREAKS.sub(" ", message.strip())
    sys.stderr.write(f"error [{reason}]: {text}\n")
    sys.stderr.flush()
