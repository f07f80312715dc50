"""``GET /admin/v3/functions/{tenant}/{namespace}/{name}/logs``: a function's log lines.

What its instances logged through ``context.get_logger()``
(:mod:`sparkfn.runtime.function.logs`), as ``text/plain``, one line each:
``?instance=N`` for one instance's, ``?follow=true`` to keep the response
open and send new lines as they are logged (until the client disconnects),
``?tail=N`` for the last N lines only (all of them when there are fewer). A
function that logged nothing yet answers an empty body; one that does not
exist, or an instance it does not have, 404 ``function_not_found``, as its
status does. A deleted function's lines go with it (:mod:`sparkfn.runtime.purge`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from sparkfn.runtime.function.logs import follow
from sparkfn.worker.api.params import MAX_INT32, Name, Namespace, Tenant
from sparkfn.worker.service import Worker

FUNCTION = "/{tenant}/{namespace}/{name}"
POLL_SECONDS = 0.2


def logs_router(worker: Worker) -> APIRouter:
    """The ``/admin/v3/functions/.../logs`` route."""
    router = APIRouter(tags=["functions"])
    data_dir = worker.settings.data_dir

    @router.get(
        FUNCTION + "/logs",
        response_class=Response,  # errors stay the app's JSON ErrorBody
        responses={
            200: {
                "description": "The lines, one per line.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
    )
    async def logs(
        request: Request,
        tenant: Tenant,
        namespace: Namespace,
        name: Name,
        instance: Annotated[int | None, Query(ge=0, le=MAX_INT32)] = None,
        follow_lines: Annotated[bool, Query(alias="follow")] = False,
        tail: Annotated[int | None, Query(ge=0, le=MAX_INT32)] = None,
    ) -> Response:
        fqfn = f"{tenant}/{namespace}/{name}"
        current = worker.registry.get(fqfn)  # 404 for a function that does not exist
        count = current.config.parallelism
        if instance is not None and instance >= count:
            msg = f"function {fqfn} has no instance {instance} (instances 0 to {count - 1})"
            raise worker.registry.missing(msg)
        logged = follow(data_dir, fqfn, instance, poll=0)
        lines: list[str] = []
        while (line := next(logged)) is not None:  # what is there now
            lines.append(line)
        if tail is not None:
            lines = lines[max(len(lines) - tail, 0) :]
        body = "".join(f"{line}\n" for line in lines)
        if not follow_lines:
            return PlainTextResponse(body)

        async def stream() -> AsyncIterator[str]:
            yield body
            while not await request.is_disconnected():
                while (line := next(logged)) is not None:
                    yield f"{line}\n"
                await asyncio.sleep(POLL_SECONDS)

        return StreamingResponse(stream(), media_type="text/plain")

    return router
