"""schemathesis against the served OpenAPI document: no 5xx, no answer the document does not allow.

The real app, served by uvicorn in this process, over a real store on both
backends, with the test session's Spark. Every operation of
``/openapi.json`` gets a bounded number of generated requests, so the run
stays well under a minute per backend.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from app_server import served
from fastapi.routing import APIRoute, iter_route_contexts
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from sparkfn.worker.api.app import create_app
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

# Generated requests per operation: enough to reach each error path, bounded for the suite's time.
# Measured on the sqlite case (derandomized, so each count makes the same requests every run):
# 10 reaches every (operation, mode, status) that 12 does, 221 in all; 8 misses four (a 404 of
# trigger and of sources/sinks PUT, a 200 of the listing with a bad query); 6 misses seven.
EXAMPLES = 10

pytestmark = pytest.mark.long_running(60)


@pytest.fixture
def api(store_url: str, data_dir: Path, spark: Any) -> Iterator[tuple[Any, str, dict[str, Any]]]:
    """The served document, loaded by schemathesis, the base URL it describes, and as JSON."""
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url), spark=spark)
    worker.open()
    worker.restore()
    try:
        with served(create_app(worker)) as client:
            url = str(client.base_url)
            document = client.get("/openapi.json").json()
            yield schemathesis.openapi.from_url(f"{url}/openapi.json"), url, document
    finally:
        worker.shutdown()


def _failures(operation: Any, mode: GenerationMode, base_url: str) -> list[str]:
    """What ``EXAMPLES`` requests of ``mode`` to ``operation`` found wrong (shrunk)."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,  # the same requests every run: a failure reproduces
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: Any) -> None:
        # Only positive_data_acceptance is left out: a request the document allows may
        # still be refused for what it means (a config that is not JSON, an unknown
        # package kind), with a 4xx and a reason, which the document cannot express.
        case.call_and_validate(base_url=base_url, excluded_checks=[positive_data_acceptance])

    try:
        check()
    except Unsatisfiable:  # nothing of the operation can be made invalid (only free text)
        return []
    except Exception as exc:  # a failed check: report it with the others
        return [f"{operation.label} ({mode.value}): {exc}"]
    return []


def _can_be_invalid(document: dict[str, Any], label: str) -> bool:
    """Whether a request to the operation can break its document (a body, a typed or
    bounded parameter); one of free-text path parameters only cannot."""
    method, path = label.split(" ", 1)
    operation = document["paths"][path][method.lower()]
    if "requestBody" in operation:
        return True
    return any(
        p["schema"].get("type") != "string" or set(p["schema"]) - {"type", "title"}
        for p in operation.get("parameters", [])
    )


@pytest.mark.backend("sqlite")
def test_every_answer_fits_the_document(api: tuple[Any, str, dict[str, Any]]) -> None:
    schema, base_url, document = api
    started = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 35  # test_the_document_lists_every_route checks which
    failures = [
        failure
        for operation in operations
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        if mode is GenerationMode.POSITIVE or _can_be_invalid(document, operation.label)
        for failure in _failures(operation, mode, base_url)
    ]
    assert not failures, "\n\n".join(failures)
    print(f"schemathesis: {len(operations)} operations in {time.monotonic() - started:.1f} s")


def test_the_document_lists_every_route_with_its_answers(store_url: str, data_dir: Path) -> None:
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url))
    worker.open()
    try:
        app = create_app(worker)
        routes = {  # the document names a parameter without its converter ({name:path})
            (method.lower(), re.sub(r"\{(\w+):\w+\}", r"{\1}", str(route.path)))
            for route in iter_route_contexts(app.routes)
            if isinstance(route.original_route, APIRoute)  # not /openapi.json, /docs
            and route.original_route.include_in_schema  # not the console's page and files
            for method in route.methods or ()
        }
        with served(app) as client:
            document = client.get("/openapi.json").json()
    finally:
        worker.shutdown()
    documented = {
        (method, path) for path, operations in document["paths"].items() for method in operations
    }
    assert documented == routes
    problems = [
        f"{method.upper()} {path}: {problem}"
        for method, path in sorted(documented)
        for problem in _answer_problems(document["paths"][path][method]["responses"])
    ]
    assert not problems, "\n".join(problems)
    assert "HTTPValidationError" not in document["components"]["schemas"]
    trigger = document["paths"]["/admin/v3/functions/{tenant}/{namespace}/{name}/trigger"]
    assert {"408", "422"} <= set(trigger["post"]["responses"])
    assert "503" in document["paths"]["/ready"]["get"]["responses"]


# Path parameters that name something: each must carry the name pattern.
NAMES = ("tenant", "namespace", "name", "topic")


def test_every_number_and_name_a_route_takes_is_bounded(store_url: str, data_dir: Path) -> None:
    """No integer without a maximum and no name without its pattern, in any parameter or
    request body: what the store cannot hold is the caller's 400, never its 500."""
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url))
    worker.open()
    try:
        with served(create_app(worker)) as client:
            document = client.get("/openapi.json").json()
    finally:
        worker.shutdown()
    problems = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                label = f"{where} {parameter['in']} {parameter['name']}"
                problems += _unbounded(document, parameter["schema"], label)
                if parameter["in"] == "path" and parameter["name"] in NAMES:
                    if "pattern" not in parameter["schema"]:
                        problems.append(f"{label}: a name without a pattern")
            for media in operation.get("requestBody", {}).get("content", {}).values():
                problems += _unbounded(document, media.get("schema", {}), f"{where} body")
    assert not problems, "\n".join(problems)


def _unbounded(document: dict[str, Any], schema: Any, label: str) -> list[str]:
    """Each integer under ``schema`` (following $refs) that has no maximum."""
    if isinstance(schema, list):
        return [p for item in schema for p in _unbounded(document, item, label)]
    if not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _unbounded(document, document["components"]["schemas"][name], f"{label} {name}")
    found = []
    if schema.get("type") == "integer" and "maximum" not in schema:
        found.append(f"{label}: an integer without a maximum")
    for key, value in schema.items():
        if key == "properties":
            for field, inner in value.items():
                found += _unbounded(document, inner, f"{label}.{field}")
        elif key in ("anyOf", "oneOf", "allOf", "items", "additionalProperties"):
            found += _unbounded(document, value, label)
    return found


def _answer_problems(answers: dict[str, Any]) -> list[str]:
    """What is missing from one operation's documented answers."""
    problems = []
    schema = answers.get("422", {}).get("content", {}).get("application/json", {}).get("schema")
    if schema is not None and "HTTPValidationError" in str(schema):
        problems.append("documents FastAPI's 422; the worker answers an invalid request with 400")
    error = answers.get("400", {}).get("content", {}).get("application/json", {})
    if error.get("schema") != {"$ref": "#/components/schemas/ErrorBody"}:
        problems.append("400 is not an ErrorBody")
    ok = [status for status in answers if status.startswith("2")]
    if len(ok) != 1:
        problems.append(f"{len(ok)} success answers: {sorted(answers)}")
    elif ok != ["204"] and not any(
        media.get("schema") for media in answers[ok[0]].get("content", {}).values()
    ):
        problems.append(f"its {ok[0]} answer has no schema")
    return problems
