"""Fixtures of the console's browser tests: Debian's Chromium driven by Playwright.

The browser is ``/usr/bin/chromium`` (``make install`` installs Debian's
package when it is missing); Playwright never downloads one. Without it the
tests skip locally and fail under ``CI=true``. With ``SPARKFN_SCREENSHOTS=1``
the tests write each page's screenshot into ``docs/images/console/``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from console_browser import CHROMIUM, FLAGS, VIEWPORT
from playwright.sync_api import Browser, Page, Route


def _missing(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI=true: the console's browser tests must run)", pytrace=False)
    pytest.skip(f"{why}; `make install` installs it")


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """One headless Chromium for the session's console tests."""
    if not CHROMIUM.is_file():
        _missing(f"Debian's Chromium is not at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=FLAGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    """A fresh browser context and page (no token kept from another test)."""
    context = chromium.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(30_000)
    # The console must not reach past the worker: any other host is refused and fails the test.
    outside: list[str] = []

    def loopback_only(route: Route) -> None:
        if urlparse(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", loopback_only)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"the console raised in the browser: {errors}"
    assert not outside, f"the console asked for something outside the worker: {outside}"
