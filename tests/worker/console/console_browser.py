"""What the console's browser tests share: the browser's path and flags, screenshots."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "images" / "console"
VIEWPORT = {"width": 1360, "height": 900}


def screenshot(page: Page, name: str) -> None:
    """Save the page as docs/images/console/NAME.png when SPARKFN_SCREENSHOTS=1."""
    if os.environ.get("SPARKFN_SCREENSHOTS") != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
