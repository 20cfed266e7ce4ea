"""Fixtures of the end-to-end tests that drive Debian's Chromium (tests/browser.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.browser import Tab, launch, tabs

try:
    from playwright.sync_api import Browser
except ImportError:  # pragma: no cover - a clear message instead of a collection error
    pytest.fail("playwright is not installed: run `make test`", pytrace=False)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launch()


@pytest.fixture
def tab(browser: Browser) -> Iterator[Callable[..., Tab]]:
    """Open fresh tabs (each a new context, so a fresh profile); all closed after the test."""
    yield from tabs(browser)
