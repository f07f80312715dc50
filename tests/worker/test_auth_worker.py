"""Auth end to end: a real worker process with auth on, tokens from ``sparkfn tokens create``."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cli_forks import run_sparkfn
from test_tokens import forge
from worker_process import WorkerProcess

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys

SECRET = "an-end-to-end-secret-of-forty-bytes-long"
AUTH_ENV = {"SPARKFN_WORKER_AUTH_ENABLED": "true", "SPARKFN_WORKER_TOKEN_SECRET_KEY": SECRET}
EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"


def _sparkfn(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_sparkfn(args, {**os.environ, **env}, 120)  # forked: tests/cli/cli_forks.py


def _cli_token(data_dir: Path, *args: str) -> dict[str, str]:
    made = _sparkfn("--data-dir", str(data_dir), "tokens", "create", *args, env=AUTH_ENV)
    assert made.returncode == 0, made.stderr
    return {"Authorization": f"Bearer {made.stdout.strip()}"}


def _refusal(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.json()["reason"] == ("unauthorized" if status == 401 else "forbidden")
    return str(response.json()["message"])


@pytest.mark.slow  # a worker process running a function on Spark: one backend (tests/conftest.py)
@pytest.mark.long_running(60)
def test_a_worker_with_auth_on_serves_tokens_by_role_and_tenant(
    store_url: str, data_dir: Path, store: Store
) -> None:
    admin = TopicAdmin(store)
    for topic in ("acme/default/in", "acme/default/out", "public/default/in"):
        admin.create(topic, schema_type="string")
    superuser = _cli_token(data_dir, "--subject", "ops", "--role", "superuser", "--expiry", "1h")
    acme = _cli_token(
        data_dir, "--subject", "ci", "--role", "tenant_admin", "--tenant", "acme", "--expiry", "1h"
    )
    keys = TokenKeys.load(secret_key=SECRET)
    expired = keys.issue(
        Principal("ops", Role.SUPERUSER), timedelta(hours=1), now=datetime(2020, 1, 1, tzinfo=UTC)
    )
    worker = WorkerProcess(data_dir, store_url, env=AUTH_ENV).start()
    try:
        with worker.client() as client:
            assert "no token" in _refusal(client.get("/acme/default"), 401)
            late = client.get("/acme/default", headers={"Authorization": f"Bearer {expired}"})
            assert "expired at 2020-01-01T01:00:00+00:00" in _refusal(late, 401)
            token = acme["Authorization"].removeprefix("Bearer ")
            forged = {"Authorization": f"Bearer {forge(token, tenant='public')}"}
            assert "signature does not verify" in _refusal(
                client.get("/public/default", headers=forged), 401
            )

            assert "may not use tenant 'public'" in _refusal(
                client.get("/public/default", headers=acme), 403
            )
            outside = _register(client, acme, inputs=["public/default/in"])
            assert "inputs public/default/in is outside tenant 'acme'" in _refusal(outside, 403)

            created = _register(client, acme, inputs=["acme/default/in"])
            assert created.status_code == 200, created.text
            assert created.json()["createdBy"] == "ci"
            assert client.get("/acme/default", headers=acme).json() == ["exclaim"]
            assert client.get("/acme/default", headers=superuser).json() == ["exclaim"]
            got = client.get("/acme/default/exclaim", headers=acme).json()
            assert (got["createdBy"], got["inputs"]) == ("ci", ["persistent://acme/default/in"])
            stopped = client.post("/acme/default/exclaim/stop", headers=acme)
            assert stopped.status_code == 204, stopped.text
        _the_cli_sends_its_token(worker.url, acme["Authorization"].removeprefix("Bearer "))
    finally:
        worker.stop()


def _the_cli_sends_its_token(url: str, token: str) -> None:
    """``--token`` and ``SPARKFN_TOKEN`` reach the worker; a refusal is one line with its reason."""
    listing = ("functions", "list", "--url", url, "--output-format", "json")
    acme = ("--tenant", "acme", "--namespace", "default")
    given = _sparkfn(*listing, *acme, "--token", token, env={})
    assert (given.returncode, json.loads(given.stdout)) == (0, ["exclaim"]), given.stderr
    from_env = _sparkfn(*listing, *acme, env={"SPARKFN_TOKEN": token})
    assert (from_env.returncode, json.loads(from_env.stdout)) == (0, ["exclaim"]), from_env.stderr
    for ran, reason in (
        (_sparkfn(*listing, *acme, env={"SPARKFN_TOKEN": ""}), "unauthorized"),
        (_sparkfn(*listing, "--token", token, env={}), "forbidden"),  # public/default
    ):
        assert ran.returncode == 1, ran.stderr
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error [{reason}]: "), ran.stderr


def _register(client: httpx.Client, headers: dict[str, str], inputs: list[str]) -> httpx.Response:
    config = {
        "inputs": inputs,
        "output": "acme/default/out",
        "subscriptionPosition": "Earliest",
    }
    with EXCLAIM.open("rb") as code:
        return client.post(
            "/acme/default/exclaim",
            data={"functionConfig": json.dumps(config)},
            files={"data": ("exclamation.py", code, "text/x-python")},
            headers=headers,
        )


def test_a_worker_on_a_public_address_without_auth_refuses_to_start(data_dir: Path) -> None:
    started = _sparkfn(
        "--data-dir", str(data_dir), "worker", "start", "--host", "0.0.0.0", "--port", "0", env={}
    )
    assert started.returncode == 1, started.stderr
    assert "error [invalid_config]" in started.stderr
    assert "host '0.0.0.0' is not a loopback address and auth is off" in started.stderr
    assert "allow_unauthenticated" in started.stderr
