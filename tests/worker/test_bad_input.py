"""Bad input on any route is the caller's 4xx with a reason, never a 500.

Numbers past what the store's columns hold (``?version=10^30`` was SQLite's
``OverflowError``, a plain-text 500) and names no function, topic or tenant
can have are refused at the edge by the shared parameter types of
:mod:`sparkfn.worker.api.params`, on both store backends, over HTTP.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from sparkfn.store.store import Store

HUGE = str(10**30)
F = "/admin/v3/functions/public/default/f"

# (method, path, request keywords, the parameter the 400 must name)
BAD_NUMBERS: list[tuple[str, str, dict[str, Any], str]] = [
    ("GET", f"{F}?version={HUGE}", {}, "query.version"),
    ("GET", f"/admin/v3/sources/public/default/s?version={HUGE}", {}, "query.version"),
    ("GET", f"/admin/v3/sinks/public/default/s?version={HUGE}", {}, "query.version"),
    ("GET", f"/admin/v3/functions?offset={HUGE}", {}, "query.offset"),
    ("GET", f"{F}/{HUGE}/status", {}, "path.instance_id"),
    ("GET", f"{F}/{HUGE}/stats", {}, "path.instance_id"),
    ("POST", f"{F}/start?instance_id={HUGE}", {}, "query.instance_id"),
    ("POST", f"{F}/{HUGE}/restart", {}, "path.instance_id"),
    ("GET", f"/admin/v3/sinks/public/default/s/{HUGE}/stats", {}, "path.instance_id"),
    ("POST", f"/admin/v3/sources/public/default/s/{HUGE}/stop", {}, "path.instance_id"),
    (
        "PUT",
        "/admin/v2/persistent/public/default/t",
        {"json": {"retentionMs": 10**30}},
        "body.retentionMs",
    ),
    (
        "PUT",
        "/admin/v2/persistent/public/default/t",
        {"json": {"retentionBytes": 10**30}},
        "body.retentionBytes",
    ),
    (
        "GET",
        f"/admin/v2/persistent/public/default/t/examinemessage?partition={HUGE}",
        {},
        "query.partition",
    ),
    (
        "POST",
        f"/topics/persistent/public/default/t/partitions/{HUGE}",
        {"json": {"messages": [{"payload": "eA=="}]}},
        "path.partition",
    ),
]

BAD_NAMES: list[tuple[str, str, str]] = [
    ("GET", "/admin/v3/functions/pub%20lic/default/f", "path.tenant"),
    ("GET", "/admin/v3/functions/public/" + "n" * 200 + "/f", "path.namespace"),
    ("DELETE", "/admin/v3/sinks/public/default/-dash", "path.name"),
    ("GET", "/admin/v3/sources/public/default/s%3Bx/status", "path.name"),
    ("GET", "/admin/v2/persistent/public/default/t%20x/stats", "path.topic"),
    ("GET", "/admin/v2/namespaces/te%24nant", "path.tenant"),
    ("GET", "/admin/v3/functions/public/default/f%2Ax/transitions", "path.name"),
    ("GET", f"{F}/state/" + "k" * 1025, "path.key"),  # PostgreSQL's column: 1024
]


def test_bad_numbers_and_names_are_400s_naming_the_parameter(client: httpx.Client) -> None:
    # One test for every case: each worker start costs seconds of the shared machine.
    counter = json.dumps({"key": "k", "numberValue": 2**63})
    cases = [
        *BAD_NUMBERS,
        *((method, path, {}, field) for method, path, field in BAD_NAMES),
        ("POST", f"{F}/state/k", {"data": {"state": counter}}, "numberValue"),
    ]
    problems = []
    for method, path, sent, field in cases:
        answer = client.request(method, path, **sent)
        body = answer.json() if answer.headers.get("content-type") == "application/json" else {}
        if (
            answer.status_code != 400
            or body.get("reason") not in ("invalid_request", "invalid_config")
            or field not in body.get("message", "")
        ):
            problems.append(f"{method} {path[:80]}: {answer.status_code} {answer.text[:200]}")
    assert not problems, "\n".join(problems)


def test_a_value_the_store_refuses_is_named_as_the_requests(store: Store) -> None:
    """The net under the bounds: the store's own refusal of a number, on each backend."""
    from sparkfn.worker.http import VALUE_OUT_OF_RANGE, refused_value

    with pytest.raises(Exception) as raised, store.read() as conn:  # noqa: PT011 (two drivers)
        conn.execute(text("SELECT CAST(:n AS INTEGER)"), {"n": 10**30}).all()
    refused = refused_value(raised.value)
    assert refused is not None, repr(raised.value)
    assert "store" in refused
    assert VALUE_OUT_OF_RANGE == "value_out_of_range"
