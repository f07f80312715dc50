"""The console with 1,000 registered functions: paged and searched on the worker, by keyboard.

Registered, not running (no Spark). The listing is paged in the store: a page
far down the list costs a few SQL statements, not one per function (counted,
not timed: a test never asserts a duration; the times are printed). Both
stores.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from console_browser import screenshot
from playwright.sync_api import Page, expect
from sqlalchemy import event
from sqlalchemy.engine import Engine

from sparkfn.config.function import FunctionConfig
from sparkfn.worker.registry import Registry
from sparkfn.worker.service import Worker

COUNT = 1000
TENANTS = ("public", "acme", "billing", "ops")


def _register_many(worker: Worker) -> None:
    registry = Registry(worker.open_store())
    for i in range(COUNT):
        tenant = TENANTS[i % len(TENANTS)]
        config = FunctionConfig(
            tenant=tenant,
            namespace=f"ns{i % 3}",
            name=f"fn-{i:04d}",
            inputs=[f"{tenant}/ns{i % 3}/in"],
            classname="m.F",
            parallelism=1 + i % 4,
        )
        registry.create(config, package_digest=None, who="test")


# A page of 50 read with a query per function would run 50 or more.
MAX_STATEMENTS_PER_PAGE = 12


@contextmanager
def _statements() -> Iterator[list[str]]:
    """Every SQL statement this process runs meanwhile (the worker is in this process)."""
    seen: list[str] = []
    lock = threading.Lock()

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        with lock:
            seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


def test_a_thousand_functions_page_and_search_quickly(
    worker: Worker, client: httpx.Client, page: Page
) -> None:
    _register_many(worker)
    started = time.perf_counter()
    with _statements() as statements:
        listing = client.get("/admin/v3/functions", params={"offset": 950, "limit": 50})
    route_seconds = time.perf_counter() - started
    assert listing.status_code == 200, listing.text
    shown = listing.json()
    assert shown["total"] == COUNT
    assert len(shown["functions"]) == 50
    assert len(statements) <= MAX_STATEMENTS_PER_PAGE, statements

    started = time.perf_counter()
    page.goto(str(client.base_url) + "/")
    count = page.get_by_test_id("fn-count")
    expect(count).to_have_text("1–50 of 1000")
    first_page = time.perf_counter() - started
    expect(page.locator("tbody tr[data-fqfn]")).to_have_count(50)
    screenshot(page, "functions-1000")

    # Keyboard only: '/' to the search, Tab to the state filters, Enter on the pager.
    page.locator("body").press("/")
    search = page.get_by_role("searchbox", name="Search functions")
    expect(search).to_be_focused()
    started = time.perf_counter()
    page.keyboard.type("fn-0777")
    expect(count).to_have_text("1–1 of 1")
    searched = time.perf_counter() - started
    expect(page.locator("tbody tr[data-fqfn]")).to_have_text([re.compile("fn-0777")])
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")
    expect(count).to_have_text("1–50 of 1000")
    page.keyboard.press("Tab")
    namespaces = page.get_by_label("Namespace")
    expect(namespaces).to_be_focused()
    namespaces.select_option("ops/ns2")
    expect(count).to_have_text(f"1–50 of {COUNT // 12}")  # i % 12 == 11
    expect(page.locator("tr.group")).to_have_text(["ops/ns2"])
    namespaces.select_option("")
    expect(count).to_have_text("1–50 of 1000")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="All")).to_be_focused()
    next_page = page.get_by_role("button", name="Next →")
    next_page.focus()
    page.keyboard.press("Enter")
    expect(count).to_have_text("51–100 of 1000")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")  # Previous, which Shift+Tab reached
    expect(count).to_have_text("1–50 of 1000")
    # A row's link opens the function by Enter too.
    link = page.locator("tbody tr[data-fqfn] a").first
    name = link.inner_text()
    link.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=name, exact=True)).to_be_visible()
    print(
        f"1000 functions: route {route_seconds * 1000:.0f} ms ({len(statements)} statements),"
        f" first page {first_page * 1000:.0f} ms, search {searched * 1000:.0f} ms"
    )
