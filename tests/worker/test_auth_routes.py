"""Auth on every route of the worker's app: the real app, served by uvicorn, over a real SQLite store.

The routes are enumerated from ``app.routes``, so a route added later without
auth fails here: without a valid token it must answer 401, and a tenant
admin must get 403 on another tenant's path and on routes that span tenants.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from test_tokens import forge, hmac_token, write_rsa_pair

from sparkfn.config.function import FunctionConfig
from sparkfn.worker.api.app import create_app
from sparkfn.worker.auth.access import ANY_ROLE, authorize
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

SECRET = "a-worker-secret-for-the-tests-0123456789"
KEYS = TokenKeys.load(secret_key=SECRET)
# Reachable without a token, on purpose (docs/rest-api.md says why).
PUBLIC = {
    "/health",
    "/openapi.json",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    # The console's page and files (sparkfn.worker.api.console): they hold no data.
    "/",
    "/console/assets/{asset}",
}
SUPERUSER = Principal("ops", Role.SUPERUSER)
ADMIN_A = Principal("alice", Role.TENANT_ADMIN, "tenant-a")
_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


def _token(principal: Principal, expiry: timedelta = timedelta(hours=1), **kw: Any) -> str:
    return KEYS.issue(principal, expiry, **kw)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def worker(data_dir: Path) -> Iterator[Worker]:
    settings = WorkerSettings.resolve(data_dir=data_dir, auth_enabled=True, token_secret_key=SECRET)
    worker = Worker(settings)
    worker.open()
    yield worker
    worker.shutdown()


@pytest.fixture
def app(worker: Worker) -> FastAPI:
    return create_app(worker)


@pytest.fixture
def client(app: FastAPI) -> Iterator[httpx.Client]:
    with served(app) as client:
        yield client


def _calls(app: FastAPI) -> list[tuple[str, str]]:
    """(method, full path template) of every route of the app, HEAD aside (it follows GET)."""
    calls = []
    for route in iter_route_contexts(app.routes):
        path, methods = route.path, route.methods
        if path is None or not methods:
            pytest.fail(f"route {route!r} has no path or methods; this test cannot cover it")
        calls += [(method, str(path)) for method in sorted(methods - {"HEAD"})]
    return calls


def _concrete(path: str, tenant: str) -> str:
    """The path with ``tenant`` for {tenant} and '0' (a name, an instance id) for the rest."""
    return _PARAM.sub(lambda m: tenant if m.group(1) == "tenant" else "0", path)


def _refused(response: Any, status: int, reason: str) -> str:
    assert response.status_code == status, (response.request.url, response.text)
    body = response.json()
    assert body["reason"] == reason, body
    return str(body["message"])


def test_every_route_refuses_a_request_without_a_valid_token(
    app: FastAPI, client: httpx.Client
) -> None:
    calls = _calls(app)
    assert len(calls) >= 20, calls  # the function routes at least: the test is not vacuous
    expired = _token(SUPERUSER, now=datetime(2020, 1, 1, tzinfo=UTC))
    tampered = forge(_token(ADMIN_A), role="superuser")
    checked = 0
    for method, template in calls:
        path = _concrete(template, "tenant-a")
        if template in PUBLIC:
            assert client.request(method, path).status_code != 401, path
            continue
        missing = client.request(method, path)
        assert "no token" in _refused(missing, 401, "unauthorized"), path
        assert missing.headers["WWW-Authenticate"] == "Bearer"
        basic = client.request(method, path, headers={"Authorization": "Basic b3BzOnB3"})
        assert "must be 'Bearer <token>'" in _refused(basic, 401, "unauthorized")
        late = client.request(method, path, headers=_bearer(expired))
        assert "expired at 2020-01-01T01:00:00+00:00" in _refused(late, 401, "unauthorized")
        forged = client.request(method, path, headers=_bearer(tampered))
        assert "signature does not verify" in _refused(forged, 401, "unauthorized")
        checked += 1
    assert checked == len([c for c in calls if c[1] not in PUBLIC])


def test_a_tenant_admin_is_confined_to_its_tenant_on_every_route(
    app: FastAPI, client: httpx.Client
) -> None:
    admin_a, superuser = _bearer(_token(ADMIN_A)), _bearer(_token(SUPERUSER))
    tenant_routes = 0
    for method, template in _calls(app):
        if template in PUBLIC:
            continue
        if "{tenant}" in template:
            tenant_routes += 1
            other = client.request(method, _concrete(template, "tenant-b"), headers=admin_a)
            message = _refused(other, 403, "forbidden")
            assert "'alice' (tenant_admin of tenant-a) may not use tenant 'tenant-b'" in message
            for headers, tenant in ((admin_a, "tenant-a"), (superuser, "tenant-b")):
                own = client.request(method, _concrete(template, tenant), headers=headers)
                assert own.status_code not in (401, 403), (method, template, own.text)
        elif (method, template) in ANY_ROLE:
            authorize(ADMIN_A, method, template, {})  # passes: any valid token may call it
        else:
            spanning = client.request(method, _concrete(template, "tenant-a"), headers=admin_a)
            assert "is for superusers" in _refused(spanning, 403, "forbidden"), template
    assert tenant_routes >= 19  # the function routes at least


def test_a_listing_shows_the_admins_own_tenant_only(worker: Worker, client: httpx.Client) -> None:
    for tenant, name in (("tenant-a", "mine"), ("tenant-b", "theirs")):
        config = FunctionConfig.build(
            tenant=tenant, name=name, classname="m.f", inputs=[f"{tenant}/default/in"]
        )
        worker.registry.create(config, package_digest=None, who="ops")
    admin_a = _bearer(_token(ADMIN_A))
    listing = client.get("/admin/v3/functions/tenant-a/default", headers=admin_a)
    assert listing.status_code == 200 and listing.json() == ["mine"]
    _refused(client.get("/admin/v3/functions/tenant-b/default", headers=admin_a), 403, "forbidden")
    assert (
        client.get("/admin/v3/functions/tenant-a/default/mine", headers=admin_a).status_code == 200
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"inputs": ["tenant-b/default/in"]}, "inputs tenant-b/default/in is outside tenant"),
        ({"inputs": ["in"]}, "inputs public/default/in is outside tenant"),
        (
            {"inputs": ["tenant-a/default/in"], "output": "public/default/out"},
            "output public/default/out is outside tenant",
        ),
        (
            {
                "inputs": ["tenant-a/default/in"],
                "deadLetterTopic": "tenant-b/x/dlq",
                "maxMessageRetries": 1,
            },  # fmt: skip
            "dead_letter_topic tenant-b/x/dlq is outside tenant",
        ),
        (
            {"inputs": ["tenant-a/default/in"], "logTopic": "tenant-b/x/log"},
            "log_topic tenant-b/x/log is outside tenant",
        ),
        ({"topicsPattern": "tenant-a/default/in|tenant-b/.*"}, "could match topics outside"),
        ({"topicsPattern": "tenant-a/default/(in|x)|(tenant-b/x/y)"}, "could match topics outside"),
        ({"topicsPattern": "persistent://tenant-b/default/.*"}, "could match topics outside"),
        ({"topicsPattern": ".*"}, "could match topics outside"),
    ],
)
def test_a_tenant_admins_function_may_name_its_own_tenants_topics_only(
    client: httpx.Client, fields: dict[str, Any], expected: str
) -> None:
    config = json.dumps({"className": "m.f", **fields})
    for verb in ("POST", "PUT"):
        response = client.request(
            verb,
            "/admin/v3/functions/tenant-a/default/f",
            data={"functionConfig": config},
            headers=_bearer(_token(ADMIN_A)),
        )
        if verb == "PUT" and response.status_code == 404:
            continue  # update of an absent function: not found before any topic is read
        assert expected in _refused(response, 403, "forbidden")


def test_a_tenant_admin_uploads_downloads_and_lists_packages_under_its_tenant_only(
    client: httpx.Client,
) -> None:
    admin_a, superuser = _bearer(_token(ADMIN_A)), _bearer(_token(SUPERUSER))

    def upload(path: str, code: bytes, headers: dict[str, str]) -> httpx.Response:
        return client.post(
            "/admin/v3/functions/upload",
            data={"path": path},
            files={"data": ("fn.py", code, "text/x-python")},
            headers=headers,
        )

    theirs = upload("tenant-b/fn.py", b"def process(x):\n    return x\n", superuser)
    assert theirs.status_code == 200, theirs.text
    refused = upload("tenant-b/fn.py", b"def process(x):\n    return 1\n", admin_a)
    assert "names packages by their sha256: digest or by a path under its tenant, tenant-a/" in (
        _refused(refused, 403, "forbidden")
    )
    mine = upload("tenant-a/fn.py", b"def process(x):\n    return x + 1\n", admin_a)
    assert mine.status_code == 200, mine.text
    assert (mine.json()["uploadedBy"], mine.json()["paths"]) == ("alice", ["tenant-a/fn.py"])

    own = client.get("/admin/v3/functions/download?path=tenant-a/fn.py", headers=admin_a)
    assert own.content == b"def process(x):\n    return x + 1\n"
    other = client.get("/admin/v3/functions/download?path=tenant-b/fn.py", headers=admin_a)
    _refused(other, 403, "forbidden")
    listed = client.get("/admin/v3/packages", headers=admin_a).json()
    assert [p["paths"] for p in listed] == [["tenant-a/fn.py"]]
    everything = client.get("/admin/v3/packages", headers=superuser).json()
    assert sorted(path for p in everything for path in p["paths"]) == [
        "tenant-a/fn.py",
        "tenant-b/fn.py",
    ]


def test_an_rs256_worker_takes_its_own_tokens_and_no_hs256_token_made_with_its_public_key(
    data_dir: Path, tmp_path: Path
) -> None:
    public, private = write_rsa_pair(tmp_path)
    settings = WorkerSettings.resolve(
        data_dir=data_dir, auth_enabled=True, token_public_key=str(public)
    )
    worker = Worker(settings)
    worker.open()
    try:
        with served(create_app(worker)) as client:
            _rs256_checks(client, public, private)
    finally:
        worker.shutdown()


def _rs256_checks(client: httpx.Client, public: Path, private: Path) -> None:
    signer = TokenKeys.load(private_key=str(private))
    good = client.get(
        "/admin/v3/functions/tenant-a/default",
        headers=_bearer(signer.issue(ADMIN_A, timedelta(minutes=5))),
    )
    assert good.status_code == 200, good.text
    claims = {"sub": "x", "role": "superuser", "exp": datetime.now(UTC) + timedelta(hours=1)}
    confused = client.get(
        "/admin/v3/functions/tenant-a/default",
        headers=_bearer(hmac_token(claims, public.read_bytes())),
    )
    assert "accepts RS256 only" in _refused(confused, 401, "unauthorized")


def test_the_openapi_document_declares_the_bearer_scheme(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
    operation = document["paths"]["/admin/v3/functions/{tenant}/{namespace}"]["get"]
    assert operation["security"] == [{"HTTPBearer": []}]
    assert {"401", "403"} <= set(operation["responses"])


def test_with_auth_off_every_request_is_the_anonymous_superuser(data_dir: Path) -> None:
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir))
    worker.open()
    try:
        with served(create_app(worker)) as client:
            assert client.get("/admin/v3/functions/any/default").status_code == 200
            document = client.get("/openapi.json").json()
            assert "securitySchemes" not in document.get("components", {})
    finally:
        worker.shutdown()
