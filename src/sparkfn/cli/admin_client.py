"""How the admin commands reach a worker: its URL, a token, and its answers as errors.

``sparkfn functions status|stats|...`` and ``sparkfn packages ...`` talk to a
worker's REST API (``sparkfn worker start``) with an :class:`AdminClient`.
Every command takes the same options, declared once here as
:class:`~sparkfn.cli.flags.Flag`\\s: ``--url`` (``SPARKFN_URL``, default the
local worker), ``--token`` (``SPARKFN_TOKEN``, sent as ``Authorization:
Bearer``) and ``--output table|json``; the function commands also take
Pulsar's ``--tenant``, ``--namespace``, ``--name`` or ``--fqfn``.

A refusal of the worker becomes the :class:`~sparkfn.api.errors.SparkfnError`
of its ``reason`` (a :class:`~sparkfn.api.errors.WorkerError` carrying the
reason when sparkfn has no class for it), so the CLI prints the API's reason
on its one error line; a worker that does not answer is a
:class:`~sparkfn.api.errors.WorkerUnreachableError` naming the URL.

>>> with AdminClient("http://127.0.0.1:6750") as client:
...     client.json("GET", "/admin/v3/functions/public/default")
['wordcount']
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import quote

import typer
from rich.console import Console, RenderableType

from sparkfn._closing import Closing
from sparkfn.api.errors import SparkfnError, WorkerError, WorkerUnreachableError
from sparkfn.cli.context import console, emit_json
from sparkfn.cli.flags import OWN_PANEL, Flag

if TYPE_CHECKING:
    import httpx

URL_ENV = "SPARKFN_URL"
TOKEN_ENV = "SPARKFN_TOKEN"
DEFAULT_URL = "http://127.0.0.1:6750"
FUNCTIONS = "/admin/v3/functions"
WORKER_PANEL = "Worker"
TIMEOUT = 120.0  # seconds: a create loads the code and starts a Spark query
PIPE_WIDTH = 160  # columns of a table printed to a pipe or a file
WATCH_SECONDS = 1.0  # how often --watch asks again, as pulsar-admin's querystate --watch


class OutputFormat(StrEnum):
    """How a command prints what the worker answered."""

    TABLE = "table"  # Rich tables, for people
    JSON = "json"  # the API's JSON, one document a line, for programs
    # As pulsar-admin prints: the JSON indented, a list one item a line, a text
    # as it is (get, status, stats and list by default, as in Pulsar).
    PULSAR = "pulsar"


def option(
    name: str,
    help_text: str,
    metavar: str | None = None,
    parses: Any = str | None,
    default: Any = None,
    *,
    panel: str = OWN_PANEL,
    aliases: tuple[str, ...] = (),
    dest: str = "",
    **settings: Any,
) -> Flag:
    """An option of an admin command's own (not a config field): what it parses, its default."""
    return Flag(
        name,
        help_text,
        metavar,
        panel,
        parses=parses,
        default=default,
        config=False,
        aliases=aliases,
        dest=dest,
        typer_settings=settings,
    )


def switch(name: str, short: str, help_text: str) -> Flag:
    """A flag that is off unless given, as ``name`` or ``short``."""
    return option(name, help_text, None, bool, False, aliases=(short,))


URL = option(
    "--url",
    "The worker's REST API.",
    "URL",
    str,
    DEFAULT_URL,
    panel=WORKER_PANEL,
    envvar=URL_ENV,
    show_envvar=True,
)
TOKEN = option(
    "--token",
    "A bearer token, for a worker with auth on (sparkfn tokens create).",
    "TOKEN",
    panel=WORKER_PANEL,
    envvar=TOKEN_ENV,
    show_envvar=True,
)


def output_flag(*names: str, default: OutputFormat = OutputFormat.TABLE) -> Flag:
    """``--output table|json|pulsar`` under ``names`` (``create`` has ``--output`` for
    its topic)."""
    first, *aliases = names
    return option(
        first,
        "table (Rich tables), json (the API's JSON, one line) or pulsar (as "
        "pulsar-admin prints it: indented JSON, a list one item a line).",
        "FORMAT",
        OutputFormat,
        default,
        panel=WORKER_PANEL,
        aliases=tuple(aliases),
        dest="output_format",
        case_sensitive=False,
    )


CONNECTION = (URL, TOKEN, output_flag("--output", "-o", "--output-format"))
# What get, status, stats and list take: pulsar-admin's JSON unless told otherwise.
CONNECTION_PULSAR = (
    URL,
    TOKEN,
    output_flag("--output", "-o", "--output-format", default=OutputFormat.PULSAR),
)

# Which function: Pulsar's --tenant/--namespace/--name, or --fqfn.
TARGET = (
    option("--tenant", "Tenant (default public).", "NAME"),
    option("--namespace", "Namespace (default default).", "NAME"),
    option("--name", "Function name.", "NAME"),
    option("--fqfn", "The function as tenant/namespace/name, instead of the three.", "FQFN"),
)
INSTANCE_ID = option(
    "--instance-id",
    "One instance (0 to parallelism - 1), not the whole function, source or sink.",
    "N",
    int | None,
    min=0,
)


def function_path(
    tenant: str | None, namespace: str | None, name: str | None, fqfn: str | None
) -> str:
    """The API path of the function named by ``--fqfn`` or ``--tenant/--namespace/--name``."""
    from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT, FunctionName

    if fqfn is not None:
        if tenant or namespace or name:
            msg = "name the function by --fqfn or by --tenant/--namespace/--name, not both"
            raise typer.BadParameter(msg, param_hint="--fqfn")
        parsed = FunctionName.parse(fqfn, field="--fqfn")
    elif not name:
        msg = "which function? Give --name (with --tenant and --namespace) or --fqfn"
        raise typer.BadParameter(msg, param_hint="--name")
    else:
        parsed = FunctionName.parse(
            f"{tenant or DEFAULT_TENANT}/{namespace or DEFAULT_NAMESPACE}/{name}", field="function"
        )
    return f"{FUNCTIONS}/{parsed}"


def part(text: str) -> str:
    """``text`` as one segment of a URL path (a state key may hold ``/``)."""
    return quote(text, safe="")


class AdminClient(Closing):
    """An HTTP client of one worker's REST API; refusals raise :class:`SparkfnError`\\s.

    Closed by :meth:`close` or by leaving a ``with`` block; closing twice is harmless.
    """

    def __init__(self, url: str, token: str | None = None, timeout: float | None = TIMEOUT) -> None:
        import httpx  # here, not above: it costs every other command a third of its start

        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        """Close the connections (idempotent)."""
        self._http.close()

    def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        """Send a request; the response if it succeeded, else the worker's error raised."""
        with self._answering(method, path):
            response = self._http.request(method, path, **options)
        if response.is_error:
            raise refusal(response)
        return response

    def save(self, path: str, out: BinaryIO, **options: Any) -> None:
        """GET ``path`` and write the body to ``out`` as it arrives."""
        with self._answering("GET", path), self._http.stream("GET", path, **options) as response:
            if response.is_error:
                response.read()
                raise refusal(response)
            for chunk in response.iter_bytes():
                out.write(chunk)

    @contextmanager
    def _answering(self, method: str, path: str) -> Iterator[None]:
        """Report a worker that cannot be reached, or does not answer in time, by its URL."""
        import httpx

        try:
            yield
        except httpx.TimeoutException:
            msg = (
                f"the worker at {self.url} did not answer {method} {path} within {self.timeout:g} s"
            )
            raise WorkerUnreachableError(msg) from None
        except httpx.TransportError as exc:
            msg = (
                f"cannot reach a worker at {self.url} ({exc or type(exc).__name__}); "
                "is `sparkfn worker start` running there?"
            )
            raise WorkerUnreachableError(msg) from None

    def json(self, method: str, path: str, **options: Any) -> Any:
        """The JSON body the worker answered."""
        return self.request(method, path, **options).json()


def refusal(response: httpx.Response) -> SparkfnError:
    """The error of a worker's error response: its reason's class, its message."""
    try:
        body = response.json()
    except ValueError:
        body = None
    request = f"{response.request.method} {response.request.url.path}"
    if not (isinstance(body, Mapping) and {"reason", "message"} <= body.keys()):
        text = response.text.strip()[:200] or response.reason_phrase
        return WorkerError(f"{request}: HTTP {response.status_code}: {text}", reason="http_error")
    reason, message = str(body["reason"]), str(body["message"])
    cls = _classes().get(reason)
    if cls is not None and cls.__init__ is Exception.__init__:
        return cls(message)
    return WorkerError(message, reason=reason)


def _classes() -> dict[str, type[SparkfnError]]:
    """Every error class by its reason."""
    found: dict[str, type[SparkfnError]] = {}
    pending: list[type[SparkfnError]] = [SparkfnError]
    while pending:
        cls = pending.pop()
        found[cls.__dict__.get("reason", "")] = cls
        pending.extend(cls.__subclasses__())
    return found


@dataclass(frozen=True)
class Call:
    """What an admin command was given: the worker, how to print, and which function."""

    url: str
    token: str | None
    output_format: OutputFormat
    path: str  # the function's API path; "" for a command about no one function

    @classmethod
    def of(cls, given: Mapping[str, Any], *, function: bool = True) -> Call:
        """The call of a command given :data:`CONNECTION` (and :data:`TARGET` if ``function``)."""
        path = ""
        if function:
            path = function_path(given["tenant"], given["namespace"], given["name"], given["fqfn"])
        return cls(given["url"], given["token"], given["output_format"], path)

    @property
    def json(self) -> bool:
        """Whether to print JSON rather than tables."""
        return self.output_format is not OutputFormat.TABLE

    @property
    def fqfn(self) -> str:
        """The function's ``tenant/namespace/name``."""
        return self.path.removeprefix(FUNCTIONS + "/")

    def client(self, timeout: float | None = TIMEOUT) -> AdminClient:
        """A client of the worker, with the token if one was given."""
        return AdminClient(self.url, self.token or None, timeout)


def show(call: Call, body: Any, render: Callable[[Any], RenderableType]) -> None:
    """``body`` as JSON with ``--output json`` (``pulsar``: indented, a list one item
    a line and a text as it is, as pulsar-admin prints), else as ``render`` draws it."""
    if call.output_format is OutputFormat.PULSAR:
        items = body if isinstance(body, list) else [body]
        text = "".join(
            (item if isinstance(item, str) else json.dumps(item, indent=2, ensure_ascii=False))
            + "\n"
            for item in items
        )
        sys.stdout.write(text)
        sys.stdout.flush()
    elif call.json:
        emit_json(body)
    else:
        table_console().print(render(body))


def table_console() -> Console:
    """A console on stdout for the tables of the admin commands.

    Names, values and configs come from users, so they are printed as they
    are (:func:`~sparkfn.cli.context.console`); on a pipe or in a file, where
    Rich assumes 80 columns, the tables get :data:`PIPE_WIDTH` so that they
    are not folded.
    """
    out = console()
    if not out.is_terminal:
        out.width = max(out.width, PIPE_WIDTH)
    return out


def changes(fetch: Callable[[], Any], interval: float = WATCH_SECONDS) -> Iterator[Any]:
    """What ``fetch`` returns, first and then each time it differs, until the caller stops.

    Asks every ``interval`` seconds; the caller ends the loop on Ctrl+C.
    """
    last: Any = object()
    while True:
        current = fetch()
        if current != last:
            last = current
            yield current
        time.sleep(interval)
