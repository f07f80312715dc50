"""Command-line options that more than one command takes, each declared once."""

from __future__ import annotations

from typing import Annotated

import typer

TopicArgument = Annotated[
    str,
    typer.Argument(
        metavar="TOPIC",
        help="NAME (in public/default), tenant/namespace/NAME or persistent://tenant/namespace/NAME.",
        show_default=False,
    ),
]
