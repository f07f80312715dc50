"""The package routes of the worker's REST API.

==========  ===================================  ===============================================
verb        path                                 what
==========  ===================================  ===============================================
POST        ``/admin/v3/functions/upload``       Pulsar's upload: multipart ``data`` (the file)
                                                 and ``path`` (the name to give it)
GET         ``/admin/v3/functions/download``     Pulsar's download: ``?path=`` an upload's path
                                                 or a ``sha256:<hex>`` digest; the file's bytes
GET         ``/admin/v3/packages``               every stored package: :class:`PackageInfo`
==========  ===================================  ===============================================

A register or update (:mod:`sparkfn.worker.api.functions_api`) names an uploaded
package with its ``url`` field, by path or by digest.

Every request body is limited to ``max_upload_bytes`` plus
:data:`FORM_OVERHEAD` for the multipart framing and the other fields
(:class:`BodyLimit`): a request whose ``Content-Length`` is larger is
refused before its body is read, one without it as soon as it has sent that
much, with 413 ``package_too_large`` either way.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from pathlib import PurePosixPath
from typing import Annotated

from fastapi import APIRouter, File, Form, Query, UploadFile
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sparkfn.api.errors import PackageTooLargeError
from sparkfn.worker.auth.access import Caller, check_package_reference, owns_package_path
from sparkfn.worker.http import error_response
from sparkfn.worker.packages.owners import path_owner, viewer
from sparkfn.worker.packages.store import KINDS, Package, PackageStore
from sparkfn.worker.service import Worker

FORM_OVERHEAD = 1024 * 1024  # bytes a request may carry besides the package itself


class PackageInfo(BaseModel):
    """A stored package (JSON keys in camelCase)."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    digest: str
    filename: str
    kind: str
    size_bytes: int
    uploaded_by: str
    uploaded_at: datetime
    paths: list[str]  # the upload paths that name it

    @classmethod
    def of(cls, package: Package, paths: list[str]) -> PackageInfo:
        """The API's view of ``package`` (where it lies on the worker's disk is not shown)."""
        fields = {k: v for k, v in asdict(package).items() if k != "path"}
        return cls(**fields, paths=paths)


def packages_router(worker: Worker) -> APIRouter:
    """The upload and download routes (under ``/admin/v3/functions``) and the package list."""
    router = APIRouter(tags=["packages"])

    def packages() -> PackageStore:
        return PackageStore.from_settings(worker.open_store(), worker.settings)

    @router.post("/admin/v3/functions/upload", response_model=PackageInfo)
    def upload(
        caller: Caller,
        data: Annotated[UploadFile, File(description="The package file.")],
        path: Annotated[str, Form(description="The name the package is uploaded under.")],
    ) -> PackageInfo:
        check_package_reference(caller, path, "path")
        store = packages()
        name = data.filename or ""
        if PurePosixPath(name).suffix.lower() not in KINDS:
            name = PurePosixPath(path).name  # a bare stream: the path's file name tells the kind
        # A superuser's upload under a tenant's path is that tenant's to use too.
        owner = path_owner(path) if caller.is_superuser else viewer(caller)
        saved = store.save(data.file, name, who=caller.subject, path=path, owner=owner)
        package = store.get(saved.digest, viewer(caller))
        paths = [p for p in store.paths().get(package.digest, []) if owns_package_path(caller, p)]
        return PackageInfo.of(package, paths)

    @router.get("/admin/v3/functions/download", response_class=FileResponse)
    def download(
        caller: Caller,
        path: Annotated[str, Query(description="An upload's path or a sha256:<hex> digest.")],
    ) -> FileResponse:
        check_package_reference(caller, path, "path")
        package = packages().resolve(path, viewer(caller))
        return FileResponse(
            package.path, filename=package.filename, media_type="application/octet-stream"
        )

    @router.get("/admin/v3/packages", response_model=list[PackageInfo])
    def list_packages(caller: Caller) -> list[PackageInfo]:
        store = packages()
        named = {
            digest: [path for path in paths if owns_package_path(caller, path)]
            for digest, paths in store.paths().items()
        }
        # A tenant admin sees the packages its tenant holds, as it holds them.
        return [PackageInfo.of(p, named.get(p.digest, [])) for p in store.list(viewer(caller))]

    return router


class BodyLimit:
    """ASGI middleware: no request body past ``max_upload_bytes`` plus :data:`FORM_OVERHEAD`.

    A ``Content-Length`` over the limit is answered at once, before the body is
    read; a body without one is counted as it arrives, and once past the limit
    the route's own answer (the body parser's error) is replaced by the 413.
    """

    def __init__(self, app: ASGIApp, *, max_upload_bytes: int) -> None:
        self.app = app
        self.max_upload_bytes = max_upload_bytes
        self.limit = max_upload_bytes + FORM_OVERHEAD

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refusal(int(declared))(scope, receive, send)
            return
        received = 0
        refused = False

        async def counted() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    refused = True
                    msg = f"request body past {self.limit} bytes"
                    raise PackageTooLargeError(msg)
            return message

        async def answer(message: Message) -> None:
            if not refused:
                await send(message)
            elif message["type"] == "http.response.start":
                await self._refusal(received)(scope, receive, send)

        await self.app(scope, counted, answer)

    def _refusal(self, size: int) -> Response:
        error = PackageTooLargeError(
            f"the request body ({size} bytes or more) is larger than the worker accepts: "
            f"{self.limit} bytes, a package of up to {self.max_upload_bytes} bytes "
            f"(max_upload_bytes) and {FORM_OVERHEAD} bytes for the other fields"
        )
        return error_response(413, error.reason, str(error))
