"""Debian's Chromium driven headless by Playwright, for the tests that look at what a person sees:
the browser, fresh tabs that record every request and console error, axe-core's accessibility
rules, and screenshots (written to STOREFRONT_SCREENSHOT_DIR too when it is set, e.g. `docs`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import ROOT

try:
    from playwright.sync_api import Browser, Frame, Page, Response, sync_playwright
except ImportError:  # pragma: no cover - a clear message instead of a collection error
    pytest.fail(
        "playwright is not installed: run `make test` (it installs requirements-dev.txt)", pytrace=False
    )

# Debian's chromium, or the Chromium or Chrome that CHROMIUM names (`make test CHROMIUM=...` sets it).
CHROMIUM = Path(os.environ.get("CHROMIUM") or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1000, "height": 800}


def screenshot_dir() -> Path | None:
    configured = os.environ.get("STOREFRONT_SCREENSHOT_DIR")
    if not configured:
        return None
    path = Path(configured)
    path = path if path.is_absolute() else ROOT / path
    path.mkdir(parents=True, exist_ok=True)
    return path


def launch() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium is not installed at {CHROMIUM}: run `make test`, which installs Debian's "
            "chromium package, or set CHROMIUM to a Chromium or Chrome you have (the tests drive "
            "it; they never download a browser)",
            pytrace=False,
        )
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Tab:
    """One page in its own fresh browser context, with every request and console error recorded."""

    def __init__(self, browser: Browser, viewport: dict, bypass_csp: bool, headers: dict | None):
        self.context = browser.new_context(
            viewport=viewport, bypass_csp=bypass_csp, extra_http_headers=headers, device_scale_factor=1
        )
        self.context.set_default_timeout(15_000)
        self.page: Page = self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def open(self, url: str) -> Response:
        response = self.page.goto(url, wait_until="load")
        assert response is not None, url
        return response


def tabs(browser: Browser) -> Iterator[Callable[..., Tab]]:
    """Open fresh tabs (each a new context, so a fresh profile); all closed after the test."""
    opened: list[Tab] = []

    def open_tab(viewport: dict = DESKTOP, *, bypass_csp: bool = False, headers: dict | None = None) -> Tab:
        opened.append(Tab(browser, viewport, bypass_csp, headers))
        return opened[-1]

    yield open_tab
    for t in opened:
        t.context.close()


def assert_accessible(target: Page | Frame) -> None:
    """axe-core's WCAG 2.0/2.1 A and AA rules and best practices: no violations. A page whose CSP
    forbids scripts is opened in a tab with bypass_csp to let axe in."""
    if isinstance(target, Frame):  # a view's hashed CSP: evaluated by the driver, not as page script
        target.evaluate(AXE.read_text(encoding="utf-8") + "\n;0")
    else:
        target.add_script_tag(path=str(AXE))
    result = target.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", AXE_TAGS)
    violations = [
        {
            "id": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "nodes": [{"target": n["target"], "summary": n.get("failureSummary")} for n in v["nodes"]],
        }
        for v in result["violations"]
    ]
    assert not violations, "axe violations:\n" + json.dumps(violations, indent=2)
    passed = {rule["id"] for rule in result["passes"]}
    assert {"html-has-lang", "document-title", "color-contrast"} <= passed, passed  # axe really ran
    incomplete = {rule["id"]: len(rule["nodes"]) for rule in result["incomplete"]}
    print(f"axe on {target.url}: {len(passed)} rules passed, needs review: {incomplete or 'none'}")


def screenshot(page: Page, tmp_path: Path, name: str, doc_name: str | None = None) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5_000
    target = screenshot_dir()
    if doc_name and target is not None:
        page.screenshot(path=str(target / doc_name), full_page=True)
