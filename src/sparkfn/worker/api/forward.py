"""Any worker of a cluster takes a control request: it forwards it to the run's owner.

A request that changes a function, source or sink
(``POST``/``PUT``/``DELETE`` under ``/admin/v3/{functions,sources,sinks}/
{tenant}/{namespace}/{name}``: start, stop, restart, drain, suspend, trigger,
update, delete, an instance's start or stop, ...) acts on the run, and the
run lives on the worker the leader assigned it to. A worker that receives
one for a run assigned to another live worker sends it on, unchanged (its
body, its ``Authorization``), to that worker's address from the membership
table, and answers with the owner's answer. The owner checks the token
itself. A forwarded request carries :data:`FORWARDED_HEADER` and is never
forwarded again.

Not forwarded: reads (status, stats, logs and state are read from the store
and the shared data directory by any worker), a create (nothing owns the
name yet: the leader places it), and a request for a run assigned to nobody
or to a worker whose lease ran out (it acts on the store here: a stop or a
start is a desired state the leader and the next owner act on).

An owner that does not answer is a 503 ``owner_unreachable`` (the request
was not done; its lease will tell, within a lease, whether it is gone).
"""

from __future__ import annotations

import re

import anyio
import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sparkfn.runtime.lifecycle.records import control_id
from sparkfn.worker.cluster.members import owner
from sparkfn.worker.http import error_response
from sparkfn.worker.service import Worker

FORWARDED_HEADER = "x-sparkfn-forwarded-by"
# The whole request is the owner's to answer: an update drains its run first.
FORWARD_TIMEOUT = 300.0
_ITEM = re.compile(r"^/admin/v3/(functions|sources|sinks)/([^/]+)/([^/]+)/([^/]+)(/.*)?$")
_KINDS = {"functions": "function", "sources": "source", "sinks": "sink"}
# Not sent on: hop-by-hop, recomputed, or this worker's own (its Origin was checked here).
_DROPPED = {"host", "content-length", "connection", "transfer-encoding", "origin", "keep-alive"}


class Forward:
    """ASGI middleware: send control requests to the owning worker (module docstring)."""

    def __init__(self, app: ASGIApp, worker: Worker) -> None:
        self.app = app
        self.worker = worker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = await self._owner_url(scope)
        if target is None:
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            body.extend(message.get("body", b""))
            if not message.get("more_body", False):
                break
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in _DROPPED
        ]
        headers.append((FORWARDED_HEADER, self.worker.settings.worker_id))
        query = scope.get("query_string", b"").decode("latin-1")
        url = f"{target}{scope['path']}" + (f"?{query}" if query else "")
        try:
            async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT) as client:
                answer = await client.request(
                    scope["method"], url, content=bytes(body), headers=headers
                )
        except httpx.HTTPError as exc:
            response = error_response(
                503,
                "owner_unreachable",
                f"the worker that runs this ({target}) did not answer the forwarded request: "
                f"{exc or type(exc).__name__}; nothing was done, try again",
            )
            await response(scope, receive, send)
            return
        kept = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in answer.headers.items()
            if k.lower() not in _DROPPED and k.lower() != "content-encoding"
        ]
        kept.append((b"content-length", str(len(answer.content)).encode()))
        start: Message = {"type": "http.response.start", "status": answer.status_code}
        await send({**start, "headers": kept})
        await send({"type": "http.response.body", "body": answer.content})

    async def _owner_url(self, scope: Scope) -> str | None:
        """The owner's base URL if this request is to be forwarded to it, else None."""
        worker = self.worker
        if scope["type"] != "http" or worker.cluster is None or worker.store is None:
            return None
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return None
        match = _ITEM.match(scope["path"])
        if match is None or match.group(5) is None and scope["method"] == "POST":
            return None  # not a named run's, or a create
        if any(k.decode("latin-1").lower() == FORWARDED_HEADER for k, _ in scope["headers"]):
            return None
        plural, tenant, namespace, name = match.group(1, 2, 3, 4)
        key = control_id(_KINDS[plural], f"{tenant}/{namespace}/{name}")
        found = await anyio.to_thread.run_sync(owner, worker.store, key)
        if found is None or found[1] is None or found[0] == worker.settings.worker_id:
            return None
        info = found[1]
        return f"http://{info.host}:{info.port}"
