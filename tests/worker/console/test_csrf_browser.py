"""Cross-site request forgery, from a real browser: another site's page cannot register code.

Debian's Chromium opens a page served from a second origin (another port
of 127.0.0.1) that POSTs a function to a worker with auth off, as any page
a developer visits could: ``fetch(..., {mode: "no-cors"})`` with a
multipart body needs no CORS preflight, so only the worker can refuse it.
The function's top level would write a marker file when loaded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Response

FUNCTIONS = "/admin/v3/functions/public/default"

ATTACK = """<!doctype html><title>cats</title><script>
const code = `open(%(marker)s, "w").write("ran")

def process(value):
    return value
`;
const form = new FormData();
form.append("functionConfig", JSON.stringify({inputs: ["public/default/csrf-in"]}));
form.append("data", new Blob([code], {type: "text/x-python"}), "csrf.py");
fetch(%(target)s, {method: "POST", mode: "no-cors", body: form})
  .then(() => { document.title = "sent"; }, (e) => { document.title = "failed: " + e; });
</script>"""


@pytest.fixture
def other_site(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A site on another port of 127.0.0.1; the test puts its page in the dict under '/'."""
    pages: dict[str, str] = {}

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, name="other-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_page_of_another_origin_cannot_register_a_function(
    chromium: Browser,
    client: httpx.Client,
    other_site: tuple[str, dict[str, str]],
    tmp_path: Path,
) -> None:
    site, pages = other_site
    marker = tmp_path / "csrf-marker"
    target = f"{str(client.base_url).rstrip('/')}{FUNCTIONS}/csrf"
    pages["/"] = ATTACK % {"marker": repr(str(marker)), "target": repr(target)}
    context = chromium.new_context()
    try:
        page = context.new_page()
        answers: list[Response] = []
        page.on("response", lambda r: answers.append(r) if r.url == target else None)
        page.goto(site + "/")
        page.wait_for_function("document.title !== 'cats'", timeout=60_000)
        assert page.title() == "sent"  # the browser sent it: only the worker stood in the way
        (answer,) = answers
        assert answer.status == 403  # an opaque answer: the browser shows the page no more
    finally:
        context.close()
    assert client.get(FUNCTIONS).json() == []
    assert not marker.exists(), "the forged request's code ran"
