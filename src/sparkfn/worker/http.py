"""How the REST API reports errors: a stable ``reason``, a message and the right HTTP status.

Every error body is ``{"reason": "...", "message": "..."}``. The reason is the
raising class's own (:mod:`sparkfn.api.errors`), so clients branch on it
rather than on the message text.

A write that found no space is a 507 ``storage_full``, a store that cannot
take it a 503 ``store_unavailable``: raised so by the store
(:mod:`sparkfn.store.failures`), and recognised here too when a driver's or
the OS's error reaches a route unconverted, so that none is a plain-text 500.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from sparkfn.api.errors import (
    AlreadyExistsError,
    AuthError,
    ConfigError,
    ForbiddenError,
    FunctionNotRunningError,
    NotEmptyError,
    NotFoundError,
    NoWorkerCapacityError,
    PackageError,
    PackageTooLargeError,
    PayloadError,
    SecretsKeyError,
    SparkfnError,
    StaleRunError,
    StorageFullError,
    StoreUnavailableError,
    SubscriptionBusyError,
    SubscriptionInUseError,
    TriggerFailedError,
    TriggerTimeoutError,
)
from sparkfn.store.failures import storage_failure

# Most specific first: the first class the error is an instance of decides.
STATUS_OF: tuple[tuple[type[SparkfnError], int], ...] = (
    (ForbiddenError, 403),
    (AuthError, 401),
    (PackageTooLargeError, 413),
    (NotFoundError, 404),
    (AlreadyExistsError, 409),
    (NotEmptyError, 409),  # Pulsar's answer to deleting a tenant or namespace in use
    (StaleRunError, 409),
    (FunctionNotRunningError, 409),
    (SubscriptionInUseError, 409),  # before ConfigError: it conflicts with another function
    (SubscriptionBusyError, 412),  # Pulsar's answer to deleting a subscription in use
    (TriggerTimeoutError, 408),
    (TriggerFailedError, 422),
    (ConfigError, 400),
    (PackageError, 400),
    (PayloadError, 400),
    (StorageFullError, 507),  # WebDAV's Insufficient Storage: retry once space is freed
    (StoreUnavailableError, 503),
    (NoWorkerCapacityError, 503),  # the cluster is full: retry once a worker has room
    (SecretsKeyError, 503),  # the worker's key, not the request, is wrong: set it and retry
)


# Starlette's own answers (no route, wrong method), as ErrorBody reasons.
HTTP_REASONS = {
    404: ("route_not_found", "no route has this path"),
    405: ("method_not_allowed", "the route has no such method"),
}


VALUE_OUT_OF_RANGE = "value_out_of_range"
"""The reason of a value the store cannot hold that no bound at the edge caught."""

# PostgreSQL's SQLSTATE class 22, "data exception": a value the column cannot take.
_PG_DATA_EXCEPTION = "22"


def refused_value(exc: BaseException) -> str | None:
    """What is wrong with the request if the store refused one of its values, else None.

    The parameter types of :mod:`sparkfn.worker.api.params` bound what a route
    takes; this is the net under them, so that a value a future route lets
    through is still the caller's 400, not a 500: SQLite's ``OverflowError``
    (an integer past 64 bits) and PostgreSQL's data exceptions (a number out
    of its column's range, text the column's type cannot read).
    """
    if isinstance(exc, OverflowError):
        return f"a number is out of the range the store can hold ({exc})"
    driver = getattr(exc, "orig", None)
    sqlstate = getattr(driver, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate.startswith(_PG_DATA_EXCEPTION):
        detail = str(driver).strip().splitlines()[0] if str(driver).strip() else sqlstate
        return f"the store refused a value of the request (PostgreSQL {sqlstate}: {detail})"
    return None


class ErrorBody(BaseModel):
    """The body of every error response."""

    reason: str
    message: str


def status_of(exc: SparkfnError) -> int:
    """The HTTP status for ``exc``: 4xx for what the caller can fix, else 500."""
    for cls, status in STATUS_OF:
        if isinstance(exc, cls):
            return status
    return 500


def error_response(status: int, reason: str, message: str) -> JSONResponse:
    """A JSON error response."""
    return JSONResponse(ErrorBody(reason=reason, message=message).model_dump(), status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    """Report sparkfn errors and request validation errors as :class:`ErrorBody`."""

    async def sparkfn_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SparkfnError)
        return error_response(status_of(exc), exc.reason, str(exc))

    async def invalid_request(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error.get("loc", ()))
            found = error.get("input")
            problems.append(f"{where}: {error.get('msg')} (got {found!r})")
        return error_response(400, "invalid_request", "; ".join(problems))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        reason, message = HTTP_REASONS.get(exc.status_code, ("http_error", str(exc.detail)))
        response = error_response(
            exc.status_code, reason, f"{message}: {request.method} {request.url.path}"
        )
        response.headers.update(exc.headers or {})  # a 405's Allow
        return response

    async def storage_error(request: Request, exc: Exception) -> JSONResponse:
        failure = storage_failure(exc, f"what {request.method} {request.url.path} writes")
        if failure is not None:
            return error_response(status_of(failure), failure.reason, str(failure))
        refused = refused_value(exc)
        if refused is None:
            raise exc  # a bug: the server's 500, with its traceback in the log
        return error_response(
            400, VALUE_OUT_OF_RANGE, f"{request.method} {request.url.path}: {refused}"
        )

    app.add_exception_handler(SparkfnError, sparkfn_error)
    app.add_exception_handler(OSError, storage_error)
    app.add_exception_handler(DBAPIError, storage_error)
    app.add_exception_handler(OverflowError, storage_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)


class NoNulCharacters:
    """ASGI middleware: a request whose path or query string holds a NUL character is a 400.

    No name, path or key of sparkfn can hold one, and PostgreSQL cannot
    even compare text with one (SQLite can), so without this a lookup of
    such a name was a 500 on one store and a 404 on the other.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = unquote_to_bytes(bytes(scope.get("query_string", b"")))
            if "\0" in scope["path"] or b"\0" in query:  # the path comes percent-decoded
                response = error_response(
                    400,
                    "invalid_request",
                    f"{scope.get('method', '')} {scope['path']!r}: NUL characters are not "
                    "allowed in a path or query parameter",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
