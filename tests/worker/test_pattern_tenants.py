"""A tenant admin's topics pattern reads its own namespace only, on every route that takes one.

A worker with HS256 auth and two tenants, ``acme`` and ``evil``: ``acme``'s
admin may not name ``evil``'s topics through a pattern (function and sink,
create and update, REST and ``sparkfn sinks create``), and ``evil`` finds
no subscription of ``acme``'s on its topic afterwards.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served
from cli_forks import run_sparkfn

from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker.api.app import create_app
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

SECRET = "a-worker-secret-for-the-pattern-tests-0123"
KEYS = TokenKeys.load(secret_key=SECRET)
ACME = Principal("alice", Role.TENANT_ADMIN, "acme")
EVIL = Principal("mallory", Role.TENANT_ADMIN, "evil")
SPY = "acme/app/out|evil/.*"
SECRET_TOPIC = "evil/x/secret"
EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"


def _headers(principal: Principal) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS.issue(principal, timedelta(hours=1))}"}


@pytest.fixture
def worker(data_dir: Path) -> Iterator[Worker]:
    settings = WorkerSettings.resolve(data_dir=data_dir, auth_enabled=True, token_secret_key=SECRET)
    worker = Worker(settings)
    worker.open()
    admin = TopicAdmin(worker.open_store())
    for topic in ("acme/app/in", "acme/app/out", "acme/app/a-1", "acme/app/b-1", SECRET_TOPIC):
        admin.create(topic, schema_type="string")
    yield worker
    worker.shutdown()


@pytest.fixture
def client(worker: Worker) -> Iterator[httpx.Client]:
    with served(create_app(worker)) as client:
        yield client


def _forbidden(response: httpx.Response) -> str:
    assert response.status_code == 403, (response.request.method, response.text)
    body = response.json()
    assert body["reason"] == "forbidden", body
    return str(body["message"])


def _no_subscription_of_acme(client: httpx.Client) -> None:
    """What ``evil`` sees on its own topic: no subscription, from anyone."""
    seen = client.get(f"/admin/v2/persistent/{SECRET_TOPIC}/subscriptions", headers=_headers(EVIL))
    assert seen.status_code == 200, seen.text
    assert seen.json() == []


def _sink(fields: dict[str, Any], tmp_path: Path) -> dict[str, str]:
    config = {"archive": "builtin://file", "configs": {"path": f"{tmp_path}/s-{{instance}}.jsonl"}}
    return {"sinkConfig": json.dumps({**config, **fields})}


def test_a_sinks_pattern_cannot_reach_another_tenant_on_create_or_update(
    client: httpx.Client, tmp_path: Path
) -> None:
    url = "/admin/v3/sinks/acme/app/spy"
    made = client.post(url, data=_sink({"topicsPattern": SPY}, tmp_path), headers=_headers(ACME))
    assert "could match topics outside tenant 'acme'" in _forbidden(made)
    # A sink of acme's own, then the same pattern as its update.
    own = client.post(
        url, data=_sink({"inputs": ["acme/app/in"]}, tmp_path), headers=_headers(ACME)
    )
    assert own.status_code == 200, own.text
    changed = client.put(url, data=_sink({"topicsPattern": SPY}, tmp_path), headers=_headers(ACME))
    assert "could match topics outside tenant 'acme'" in _forbidden(changed)
    shown = client.get(url, headers=_headers(ACME)).json()
    assert shown.get("topicsPattern") is None, shown  # the refused update changed nothing
    _no_subscription_of_acme(client)


def test_a_functions_pattern_names_its_namespace_and_stays_in_its_tenant(
    client: httpx.Client,
) -> None:
    url = "/admin/v3/functions/acme/app/f"

    def config(pattern: str) -> dict[str, str]:
        fields = {"topicsPattern": pattern, "output": "acme/app/out"}
        return {"functionConfig": json.dumps(fields)}

    def send(verb: str, pattern: str) -> httpx.Response:
        with EXCLAIM.open("rb") as code:
            return client.request(
                verb,
                url,
                data=config(pattern),
                files={"data": ("exclamation.py", code, "text/x-python")},
                headers=_headers(ACME),
            )

    for verb in ("POST", "PUT"):
        refused = send(verb, SPY)
        if verb == "PUT":
            assert refused.status_code == 404, refused.text  # nothing to update yet
            continue
        assert "could match topics outside tenant 'acme'" in _forbidden(refused)
    # A pattern that spans namespaces names none: refused for everyone, saying why.
    spanning = send("POST", "acme/.*")
    assert spanning.status_code == 400, spanning.text
    assert spanning.json()["reason"] == "invalid_config"
    assert "must start with its namespace written out" in spanning.json()["message"]
    # Alternatives inside acme's namespace are acme's own: accepted, then an update to the spy's refused.
    own = send("POST", "acme/app/a-.*|acme/app/b-.*")
    assert own.status_code == 200, own.text
    changed = send("PUT", SPY)
    assert "could match topics outside tenant 'acme'" in _forbidden(changed)
    _no_subscription_of_acme(client)


def test_sparkfn_sinks_create_with_a_pattern_into_another_tenant_is_refused(
    client: httpx.Client, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
    token = KEYS.issue(ACME, timedelta(hours=1))
    env |= {"SPARKFN_URL": str(client.base_url), "SPARKFN_TOKEN": token, "COLUMNS": "200"}
    args = [
        "sinks", "create", "--tenant", "acme", "--namespace", "app", "--name", "spy",
        "--sink-type", "file", "--topics-pattern", SPY,
        "--sink-config", json.dumps({"path": f"{tmp_path}/s-{{instance}}.jsonl"}),
    ]  # fmt: skip
    ran = run_sparkfn(args, env, 120)  # forked from a warm server: tests/cli/cli_forks.py
    assert ran.returncode != 0, ran.stdout
    assert "could match topics outside tenant 'acme'" in ran.stderr
    assert "Traceback" not in ran.stderr
    _no_subscription_of_acme(client)
