"""Requests from other sites: the worker answers only its own names and its own pages.

A worker without auth runs whatever code is POSTed to it, and a browser
lets any page send a POST anywhere: a multipart form needs no CORS
preflight, so ``fetch(worker, {method: "POST", mode: "no-cors", body})``
from any site the developer visits would register (and run) a function.
A page may also point a name it controls at 127.0.0.1 once loaded (DNS
rebinding) and then read the worker as its own origin. So, with auth on
or off (:class:`RequestOrigins`, in front of everything else):

* a request whose ``Host`` is not one the worker serves is refused with
  421 ``host_not_allowed``. The names served are ``allowed_hosts``
  (``SPARKFN_WORKER_ALLOWED_HOSTS``, ``--allowed-host``): by default
  ``localhost``, ``127.0.0.1`` and ``[::1]``, plus the bind host when it is
  a concrete name or address, each at the worker's own port. An entry
  ``name:port`` allows that port, an entry ``name`` the worker's port, and
  ``*`` any host (behind a proxy that checks it);
* a POST, PUT, PATCH or DELETE whose ``Origin`` header is present and is
  not the worker's own origin (``http://`` or ``https://`` and the
  ``Host`` it was sent to) is refused with 403 ``cross_origin_refused``.
  The console is served from the worker's origin and the CLI sends no
  ``Origin``: both pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from sparkfn.worker.http import error_response

HOST_NOT_ALLOWED = "host_not_allowed"
CROSS_ORIGIN_REFUSED = "cross_origin_refused"
# Misdirected Request: this server does not serve that authority.
HOST_STATUS = 421
ORIGIN_STATUS = 403
ANY_HOST = "*"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
# Binding to these serves every address: none of them is a name a client uses.
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})  # noqa: S104 - names compared, not bound
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HTTP_DEFAULT_PORT = 80


def default_hosts(bind_host: str) -> tuple[str, ...]:
    """The loopback names, and ``bind_host`` when it names one address (not ``0.0.0.0``)."""
    bind = f"[{bind_host}]" if ":" in bind_host and not bind_host.startswith("[") else bind_host
    extra = () if bind.lower() in WILDCARD_BINDS or bind.lower() in LOOPBACK_NAMES else (bind,)
    return (*LOOPBACK_NAMES, *extra)


def split_host(value: str) -> tuple[str, int | None]:
    """``name[:port]`` (IPv6 in brackets) as its lower-case name and its port, if any."""
    value = value.strip().lower()
    name, colon, port = value.rpartition(":")
    if not colon or (value.startswith("[") and not name.endswith("]")) or not port.isdigit():
        return value, None
    return name, int(port)


class RequestOrigins:
    """ASGI middleware: refuse a foreign ``Host``, and a state change from a foreign ``Origin``."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        entries = list(allowed_hosts)
        self.any_host = ANY_HOST in entries
        self.allowed = [split_host(entry) for entry in entries if entry != ANY_HOST]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if not self._serves(host, scope):
            message = (
                f"{scope['method']} {scope['path']}: this worker does not serve the host "
                f"{host!r}; it serves {self._describe()} (allowed_hosts, "
                "SPARKFN_WORKER_ALLOWED_HOSTS)"
            )
            await error_response(HOST_STATUS, HOST_NOT_ALLOWED, message)(scope, receive, send)
            return
        origin = headers.get(b"origin")
        if scope["method"] in STATE_CHANGING and origin is not None:
            sent = origin.decode("latin-1")
            if sent.lower() not in {f"http://{host}".lower(), f"https://{host}".lower()}:
                message = (
                    f"{scope['method']} {scope['path']} from the page of origin {sent!r} "
                    f"refused: only pages of this worker's origin (http://{host}) may change "
                    "anything, so that another site a browser visits cannot"
                )
                await error_response(ORIGIN_STATUS, CROSS_ORIGIN_REFUSED, message)(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)

    def _serves(self, host: str, scope: Scope) -> bool:
        if self.any_host:
            return True
        if not host:
            return False
        name, port = split_host(host)
        port = HTTP_DEFAULT_PORT if port is None else port
        server = scope.get("server")
        own_port = server[1] if server and server[1] is not None else None
        return any(
            name == allowed and port == (own_port if allowed_port is None else allowed_port)
            for allowed, allowed_port in self.allowed
        )

    def _describe(self) -> str:
        return ", ".join(name if port is None else f"{name}:{port}" for name, port in self.allowed)
