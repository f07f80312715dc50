"""The console with auth on: it asks for a token, refuses a wrong one, and shows what the token may see.

The worker runs in this process on a real store and serves its app over
HTTP; no Spark is needed, since nothing runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from app_server import served
from console_browser import screenshot
from playwright.sync_api import Page, expect
from test_tokens import hmac_token

from sparkfn.config.function import FunctionConfig
from sparkfn.worker.api.app import create_app
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys
from sparkfn.worker.registry import Registry
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

SECRET = "a-console-secret-for-the-tests-0123456789"
KEYS = TokenKeys.load(secret_key=SECRET)
OTHER_KEYS = TokenKeys.load(secret_key="another-worker-secret-0123456789-abcdef")


@pytest.fixture
def client(data_dir: Path) -> Iterator[httpx.Client]:
    settings = WorkerSettings.resolve(data_dir=data_dir, auth_enabled=True, token_secret_key=SECRET)
    worker = Worker(settings)
    worker.open()
    registry = Registry(worker.open_store())
    for tenant, name in (("public", "shipping"), ("acme", "enrich"), ("acme", "score")):
        config = FunctionConfig(
            tenant=tenant, namespace="default", name=name, inputs=["in"], classname="m.F"
        )
        registry.create(config, package_digest=None, who="test")
    try:
        with served(create_app(worker)) as client:
            yield client
    finally:
        worker.shutdown()


def _sign_in(page: Page, token: str) -> None:
    page.get_by_label("Token", exact=True).fill(token)
    page.get_by_label("Token", exact=True).press("Tab")
    page.keyboard.press("Enter")  # the Sign in button, reached by Tab


def test_the_console_asks_for_a_token_and_refuses_a_wrong_one(
    client: httpx.Client, page: Page
) -> None:
    url = str(client.base_url)
    # The page itself is public (it holds nothing); the API behind it is not.
    assert client.get("/").status_code == 200
    assert client.get("/admin/v3/functions").status_code == 401

    page.goto(url + "/")
    prompt = page.get_by_role("heading", name="This worker asks for a token")
    expect(prompt).to_be_visible()
    expect(page.get_by_label("Token", exact=True)).to_be_focused()
    screenshot(page, "token")

    _sign_in(page, "not-a-token")
    error = page.get_by_test_id("token-error")
    expect(error).to_contain_text("refused the token")
    expect(error).to_contain_text("not a well-formed JWT")
    expect(prompt).to_be_visible()

    forged = OTHER_KEYS.issue(Principal("mallory", Role.SUPERUSER), timedelta(hours=1))
    _sign_in(page, forged)
    expect(error).to_contain_text("signature does not verify")
    gone = datetime.now(UTC) - timedelta(seconds=10)
    expired = hmac_token({"sub": "ops", "role": "superuser", "exp": gone}, SECRET.encode())
    _sign_in(page, expired)
    expect(error).to_contain_text("expired")
    expect(page.get_by_role("heading", name="Functions")).to_have_count(0)

    _sign_in(page, KEYS.issue(Principal("ops", Role.SUPERUSER), timedelta(hours=1)))
    expect(page.get_by_role("heading", name="Functions")).to_be_visible()
    expect(page.get_by_test_id("fn-count")).to_have_text("1–3 of 3")
    page.reload()  # the token is kept for the tab
    expect(page.get_by_test_id("fn-count")).to_have_text("1–3 of 3")

    page.get_by_role("button", name="Sign out").click()
    expect(prompt).to_be_visible()
    admin = KEYS.issue(Principal("alice", Role.TENANT_ADMIN, "acme"), timedelta(hours=1))
    _sign_in(page, admin)
    expect(page.get_by_test_id("fn-count")).to_have_text("1–2 of 2")
    names = page.locator("tbody tr[data-fqfn]")
    expect(names).to_have_text([re.compile("enrich"), re.compile("score")])
    # The worker page spans every tenant: a tenant admin is told why it cannot see it.
    page.goto(url + "/#/worker")
    expect(page.get_by_role("alert").first).to_contain_text("forbidden")
