"""Requests from other sites (``sparkfn.worker.auth.origins``): a foreign Host or Origin reaches nothing.

The real app over HTTP, auth off (the default) and on: a ``Host`` the worker
does not serve is a 421 ``host_not_allowed`` (DNS rebinding), a state
change from a page of another origin a 403 ``cross_origin_refused``; the
CLI (no ``Origin``) and the worker's own pages pass. ``HEAD /`` is public as
``GET /`` is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from app_server import served

from sparkfn.worker.api.app import create_app
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

FUNCTIONS = "/admin/v3/functions/public/default"
SECRET = "a-worker-secret-for-the-origin-tests-01234"


def _port(client: httpx.Client) -> int:
    port = client.base_url.port
    assert port is not None
    return port


def _refused(response: httpx.Response, status: int, reason: str) -> str:
    assert response.status_code == status, (response.request.headers, response.text)
    body = response.json()
    assert body["reason"] == reason, body
    return str(body["message"])


def test_a_host_the_worker_does_not_serve_is_refused_on_every_route(
    client: httpx.Client,
) -> None:
    """DNS rebinding: evil.example resolved to 127.0.0.1 reaches the socket, not the API."""
    port = _port(client)
    for path in ("/health", "/", f"{FUNCTIONS}", "/admin/v2/persistent/public/default"):
        message = _refused(
            client.get(path, headers={"Host": f"evil.example:{port}"}), 421, "host_not_allowed"
        )
        assert f"does not serve the host 'evil.example:{port}'" in message
    refused = client.post(
        f"{FUNCTIONS}/rebound", headers={"Host": "evil.example"}, data={"functionConfig": "{}"}
    )
    _refused(refused, 421, "host_not_allowed")
    _refused(
        client.get("/health", headers={"Host": f"127.0.0.1:{port + 1}"}), 421, "host_not_allowed"
    )
    for served_name in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert client.get("/health", headers={"Host": served_name}).status_code == 200, served_name
    assert client.get(FUNCTIONS).json() == []


def test_a_state_change_from_another_origin_is_refused_and_one_from_its_own_is_not(
    client: httpx.Client,
) -> None:
    own = f"http://127.0.0.1:{_port(client)}"
    config = {"functionConfig": json.dumps({"inputs": ["in"], "className": "m.f"})}
    for verb in ("POST", "PUT", "DELETE"):
        sent = client.request(
            verb, f"{FUNCTIONS}/csrf", data=config if verb != "DELETE" else None,
            headers={"Origin": "http://evil.example"},
        )  # fmt: skip
        message = _refused(sent, 403, "cross_origin_refused")
        assert "'http://evil.example' refused" in message
    _refused(
        client.post(f"{FUNCTIONS}/csrf", data=config, headers={"Origin": "null"}),
        403,
        "cross_origin_refused",
    )
    assert client.get(FUNCTIONS).json() == []
    # Reading from another origin is the browser's to refuse (no CORS headers): not refused here.
    assert client.get(FUNCTIONS, headers={"Origin": "http://evil.example"}).status_code == 200
    # Its own origin, and no Origin at all (the CLI), reach the route: here its own 400.
    for headers in ({"Origin": own}, {}):
        reached = client.post(f"{FUNCTIONS}/csrf", data=config, headers=headers)
        assert reached.json()["reason"] not in ("cross_origin_refused", "host_not_allowed")


@pytest.fixture
def auth_client(data_dir: Path) -> Iterator[httpx.Client]:
    settings = WorkerSettings.resolve(data_dir=data_dir, auth_enabled=True, token_secret_key=SECRET)
    worker = Worker(settings)
    worker.open()
    try:
        with served(create_app(worker)) as client:
            yield client
    finally:
        worker.shutdown()


def test_with_auth_on_a_foreign_host_or_origin_is_refused_even_with_a_valid_token(
    auth_client: httpx.Client,
) -> None:
    token = TokenKeys.load(secret_key=SECRET).issue(
        Principal("ops", Role.SUPERUSER), timedelta(hours=1)
    )
    bearer = {"Authorization": f"Bearer {token}"}
    _refused(
        auth_client.get(FUNCTIONS, headers={**bearer, "Host": "evil.example"}),
        421,
        "host_not_allowed",
    )
    _refused(
        auth_client.delete(f"{FUNCTIONS}/f", headers={**bearer, "Origin": "http://evil.example"}),
        403,
        "cross_origin_refused",
    )
    assert auth_client.get(FUNCTIONS, headers=bearer).status_code == 200


def test_head_of_the_public_page_answers_as_its_get(auth_client: httpx.Client) -> None:
    for path in ("/", "/health"):
        got, head = auth_client.get(path), auth_client.head(path)
        assert got.status_code == 200, got.text
        assert head.status_code == got.status_code, (path, head.status_code)
        assert head.headers["content-type"] == got.headers["content-type"]
        assert head.content == b""
    # A route that is not public stays so for HEAD.
    assert auth_client.head(FUNCTIONS).status_code == 401


def test_allowed_hosts_come_from_the_settings_and_the_environment(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARKFN_WORKER_ALLOWED_HOSTS", "fn.example.test, proxy.test:8443")
    settings = WorkerSettings.resolve(data_dir=data_dir)
    assert settings.allowed_hosts == ("fn.example.test", "proxy.test:8443")
    worker = Worker(settings)
    worker.open()
    try:
        with served(create_app(worker)) as client:
            port = _port(client)
            for host, status in (
                (f"fn.example.test:{port}", 200),
                ("proxy.test:8443", 200),
                ("proxy.test", 421),
                (f"127.0.0.1:{port}", 421),  # the list replaces the defaults
            ):
                assert client.get("/health", headers={"Host": host}).status_code == status, host
    finally:
        worker.shutdown()
    anything = WorkerSettings.resolve(data_dir=data_dir, allowed_hosts=["*"])
    assert anything.allowed_hosts == ("*",)
