"""The served OpenAPI document says what the worker answers, errors included.

FastAPI documents a 422 ``HTTPValidationError`` on every route that takes
parameters; the worker answers an invalid request with 400 ``invalid_request``
(:mod:`sparkfn.worker.http`) instead, which the app documents for every route
as :class:`~sparkfn.worker.http.ErrorBody`. :func:`complete_openapi` drops
the 422s, and the validation schemas with them, so a client generated from
the document (or schemathesis checking answers against it) sees what the
worker really sends. A route answering a file gets its body documented as
binary, which FastAPI leaves out; and a required form field must not be
empty, since FastAPI takes an empty form value for a missing one.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse, StreamingResponse
from fastapi.routing import APIRoute, iter_route_contexts

# FastAPI's own validation-error schemas, never sent by the worker.
_UNUSED_SCHEMAS = ("HTTPValidationError", "ValidationError")


def complete_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` document the worker's own error answers only."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = build()
        paths = document.get("paths", {})
        for operations in paths.values():
            for operation in operations.values():
                answers = operation.get("responses", {}) if isinstance(operation, dict) else {}
                if _is_validation_error(answers.get("422")):
                    del answers["422"]
        for route in iter_route_contexts(app.routes):
            original = route.original_route
            if not isinstance(original, APIRoute) or not _is_file(original):
                continue
            for method in route.methods or ():
                answers = paths.get(str(route.path), {}).get(method.lower(), {}).get("responses")
                if answers is not None:
                    answers.setdefault("200", {"description": "The file."})["content"] = {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    }
        schemas = document.get("components", {}).get("schemas", {})
        for operations in paths.values():
            for operation in operations.values():
                if isinstance(operation, dict):
                    _require_form_text(operation, schemas)
        for name in _UNUSED_SCHEMAS:
            schemas.pop(name, None)
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _is_file(route: APIRoute) -> bool:
    """Whether the route answers with a file (raw bytes, not JSON)."""
    answer = route.response_class
    return isinstance(answer, type) and issubclass(answer, FileResponse | StreamingResponse)


def _is_validation_error(answer: Any) -> bool:
    """Whether a documented answer is FastAPI's own 422 ``HTTPValidationError``."""
    if not isinstance(answer, dict):
        return False
    schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref", "").endswith("/HTTPValidationError"))


_FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")


def _require_form_text(operation: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Give each required text field of the operation's form ``minLength`` 1."""
    content = operation.get("requestBody", {}).get("content", {})
    for media in _FORMS:
        ref = content.get(media, {}).get("schema", {}).get("$ref", "")
        form = schemas.get(ref.rsplit("/", 1)[-1], {})
        for name in form.get("required", []):
            field = form.get("properties", {}).get(name, {})
            if field.get("type") == "string" and "format" not in field:
                field["minLength"] = max(1, field.get("minLength", 0))
