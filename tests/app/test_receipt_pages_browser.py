"""The receipt and finance pages in a real browser: Debian's Chromium, driven headless by Playwright
against the session's dev host, on a receipt bought through the real purchase flow.

Checks what a person sees (sections, the six checks, the signature verdict, the billing figures),
that the pages fit a phone and print, that they load nothing but themselves, and runs axe-core
(WCAG 2.0 and 2.1 A/AA rules, and its best practices) on each page. Screenshots go to pytest's
tmp_path; with STOREFRONT_SCREENSHOT_DIR set (e.g. `STOREFRONT_SCREENSHOT_DIR=docs`), the two
screenshots docs/receipts.md shows are written there too.
"""

from __future__ import annotations

import json
import re

import pytest
import requests

from shared.protocols import pages
from shared.purchase.receipt import signatures
from tests.agents import AgentKey, KeyDirectory, Signed
from tests.browser import DESKTOP, PHONE, Tab, assert_accessible, screenshot
from tests.support import Buyer

try:
    from playwright.sync_api import Page, expect
except ImportError:  # pragma: no cover - a clear message instead of a collection error
    pytest.fail(
        "playwright is not installed: run `make test` (it installs requirements-dev.txt)", pytrace=False
    )

CHECK_LABELS = {
    "idempotency": "Idempotency",
    "input_schema": "Input schema",
    "rate_limit": "Rate limit",
    "cost_ceiling": "Cost ceiling",
    "contact_upsert": "Contact upsert",
    "fulfillment_email": "Fulfillment email",
}
RESULT_WORDS = {"pass": "Pass", "fail": "Fail", "skipped": "Skipped", "degraded": "Degraded"}
JSON = "application/json"
USER_AGENT = "example-agent/1.0 (storefront browser test)"
MISSING_ID = "rcpt_" + "a" * 26


@pytest.fixture(scope="module")
def agent():
    """An agent that signs with Web Bot Auth, its key directory on loopback."""
    key = AgentKey()
    directory = KeyDirectory(key)
    yield key, directory
    directory.close()


@pytest.fixture(scope="module")
def bought(host, agent) -> dict:
    """A fulfilled receipt from the real purchase flow, asked for by a verified agent (plus two
    more by unverified callers, so the day has a few)."""
    receipts = []
    for signs in (True, False, False):
        buyer = Buyer(host.url)
        if signs:
            buyer.http.auth = Signed(agent[0], agent[1].origin)
        answer = buyer.purchase(headers={"Idempotency-Key": buyer.key, "User-Agent": USER_AGENT})
        assert answer.status_code == 200, answer.text
        receipts.append(answer.json())
    receipt = receipts[0]
    assert receipt["status"] == "fulfilled"
    assert receipt["checks"][0]["result"] == "pass"  # the key was claimed
    return receipt


def receipt_url(host, receipt_id: str) -> str:
    return f"{host.url}/api/receipts/{receipt_id}"


def day_url(host, day: str, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"date": day, **params}.items())
    return f"{host.url}/api/receipts?{query}"


def fields(page: Page, section: str) -> dict[str, str]:
    """The label → value pairs of the definition lists in the section headed by `#section`."""
    return page.evaluate(
        r"""id => Object.fromEntries(
            [...document.querySelectorAll(`section[aria-labelledby="${id}"] dl > div`)].map(
                d => [d.querySelector('dt').innerText, d.querySelector('dd').innerText].map(
                    text => text.replace(/\s+/g, ' ').trim())))""",
        section,
    )


def assert_loads_only_itself(t: Tab, url: str, status: int = 200) -> None:
    """The document was the only request, and nothing (a blocked resource, a CSP report) was logged;
    Chromium logs an error status of the document itself, which is expected for a 404 page."""
    assert t.requests == [url], t.requests
    expected = f"the server responded with a status of {status}"
    assert [e for e in t.errors if status < 400 or expected not in e] == [], t.errors


def assert_fits(page: Page) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is wider than the viewport: {width}"


# ----- the receipt page ---------------------------------------------------------------------------


def test_receipt_page_shows_the_audit_and_the_bill(host, bought, tab, tmp_path) -> None:
    url = receipt_url(host, bought["receipt_id"])
    t = tab(DESKTOP)
    response = t.open(url)
    page = t.page
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert_loads_only_itself(t, url)
    # The inline stylesheet applies under the CSP (the header bar has its dark background).
    assert page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor") == (
        "rgb(31, 41, 55)"
    )
    assert page.title() == f"Receipt {bought['receipt_id']} · Storefront"

    expect(page.get_by_role("heading", level=1)).to_have_text(f"Receipt {bought['receipt_id']}")
    expect(page.get_by_role("heading", name="Security audit", level=2)).to_be_visible()
    expect(page.get_by_role("heading", name="Finance billing view", level=2)).to_be_visible()
    agent = bought["caller"]["agent"]
    expect(page.get_by_text(f"Verified: {agent['origin']}")).to_be_visible()
    expect(page.get_by_text(agent["key_thumbprint"])).to_be_visible()

    checks = page.get_by_role("table", name=re.compile("runtime checks"))
    expect(checks).to_be_visible()
    rows = checks.locator("tbody tr")
    expect(rows).to_have_count(6)
    for i, check in enumerate(bought["checks"]):
        row = rows.nth(i)
        expect(row.get_by_role("rowheader")).to_contain_text(CHECK_LABELS[check["name"]])
        expect(row.get_by_role("rowheader")).to_contain_text(check["name"])
        cells = row.get_by_role("cell")
        expect(cells.nth(0)).to_have_text(re.compile(rf"^\W*{RESULT_WORDS[check['result']]}$"))
        expect(cells.nth(1)).to_have_text(check["detail"])

    signature = page.locator("#signature-status")
    expect(signature).to_be_visible()
    assert signature.inner_text().strip() == "✓ Verified"
    audit = fields(page, "audit")
    assert audit["Checked by the server"] == f"signed by the store's key {bought['signature']['kid']}"
    assert audit["Key id"] == bought["signature"]["kid"]
    assert audit["Caller channel"].startswith("HTTP")
    assert audit["User agent"] == USER_AGENT
    assert audit["Status"].endswith("Fulfilled")
    idempotency = bought["checks"][0]
    assert audit["Idempotency outcome"].endswith(
        f"{RESULT_WORDS[idempotency['result']]} {idempotency['detail']}"
    )
    assert audit["Download token id"] == bought["download"]["token_id"]
    assert audit["Buyer (masked)"] == bought["buyer"]["hint"]
    assert audit["Buyer id (keyed hash)"] == bought["buyer"]["id"]
    assert "@example.org" not in page.content()  # the buyer's address never reaches the page

    billing = fields(page, "billing")
    money = bought["billing"]
    assert billing == {
        "Bundle": bought["bundle"]["title"],
        "Bundle id": bought["bundle"]["id"],
        "Amount": f"{money['amount']} {money['currency']}",
        "Currency": money["currency"],
        "Cost estimate": f"{money['cost_estimate']} {money['cost_currency']}",
        "Cost currency": money["cost_currency"],
        "Receipt id": bought["receipt_id"],
        "Issued at": bought["issued_at"].replace("T", " ").replace("Z", " UTC"),
    }
    issued = page.locator("section[aria-labelledby=billing] time")
    expect(issued).to_have_attribute("datetime", bought["issued_at"])

    assert_fits(page)
    screenshot(page, tmp_path, "receipt-desktop", "receipt-page.png")


def test_receipt_page_on_a_phone_and_in_print(host, bought, tab, tmp_path) -> None:
    t = tab(PHONE)
    t.open(receipt_url(host, bought["receipt_id"]))
    page = t.page
    expect(page.get_by_role("heading", name="Security audit")).to_be_visible()
    expect(page.get_by_role("table", name=re.compile("runtime checks")).locator("tbody tr")).to_have_count(6)
    assert_fits(page)
    screenshot(page, tmp_path, "receipt-phone")

    page.emulate_media(media="print")
    for name in ("Security audit", "Finance billing view"):
        expect(page.get_by_role("heading", name=name, level=2)).to_be_visible()
    expect(page.locator("#signature-status")).to_be_visible()
    style = page.evaluate(
        """() => ({body: getComputedStyle(document.body).color,
                   background: getComputedStyle(document.body).backgroundColor,
                   header: getComputedStyle(document.querySelector('header')).backgroundColor,
                   badge: getComputedStyle(document.querySelector('.badge')).color})"""
    )
    assert style == {
        "body": "rgb(0, 0, 0)",
        "background": "rgba(0, 0, 0, 0)",
        "header": "rgba(0, 0, 0, 0)",
        "badge": "rgb(0, 0, 0)",
    }
    screenshot(page, tmp_path, "receipt-print")
    pdf = tmp_path / "receipt.pdf"
    page.pdf(path=str(pdf), format="A4")
    assert pdf.read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_receipt_page_passes_axe(host, bought, tab, viewport) -> None:
    t = tab(viewport, bypass_csp=True)
    t.open(receipt_url(host, bought["receipt_id"]))
    assert_accessible(t.page)


def test_json_clients_still_get_the_raw_receipt(host, bought, tab) -> None:
    """Content negotiation both ways: the same URL is JSON for an agent and a page for a person."""
    url = receipt_url(host, bought["receipt_id"])
    stored = requests.get(url, headers={"Accept": "application/json"}, timeout=10)
    assert stored.headers["Content-Type"].startswith("application/json")
    assert json.loads(stored.content) == bought

    t = tab(DESKTOP)
    t.page.route(url, lambda route: route.continue_(headers={**route.request.headers, "accept": JSON}))
    response = t.open(url)
    assert response.status == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.body() == stored.content
    assert t.page.get_by_role("heading", name="Security audit").count() == 0

    browser_default = tab(DESKTOP).open(url)
    assert browser_default.headers["content-type"].startswith("text/html")
    assert "accept" in browser_default.headers["vary"].lower()
    page = requests.get(url, headers={"Accept": "text/html"}, timeout=10)
    assert page.headers["Content-Type"].startswith("text/html")
    assert '<h2 id="audit">Security audit</h2>' in page.text


# ----- the finance day page -----------------------------------------------------------------------


def test_finance_day_page_lists_the_receipt(host, bought, tab, tmp_path) -> None:
    day = bought["issued_at"][:10]
    t = tab(DESKTOP)
    url = day_url(host, day, page_size=200)
    response = t.open(url)
    page = t.page
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/html")
    assert_loads_only_itself(t, url)
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Receipts of {day}")
    expect(page.get_by_role("heading", name="Day totals")).to_be_visible()

    listing = requests.get(day_url(host, day, page_size=200), timeout=10).json()
    totals = fields(page, "totals")
    assert totals["Receipts"] == str(listing["count"])
    usd = listing["totals"]["USD"]
    assert totals["Amount in USD"] == f"{usd['amount']} USD"
    assert totals["Cost estimate of USD receipts"] == f"{usd['cost_estimate']} USD"

    table = page.get_by_role("table", name=re.compile(f"receipts issued on {day}"))
    link = table.get_by_role("link", name=bought["receipt_id"])
    while link.count() == 0:  # more than a page of receipts today: follow the pagination
        next_page = page.get_by_role("link", name="Next page")
        assert next_page.count() == 1, f"{bought['receipt_id']} is not listed for {day}"
        next_page.click()
        page.wait_for_load_state()
    expect(link).to_have_attribute("href", f"/api/receipts/{bought['receipt_id']}")
    row = table.locator("tbody tr").filter(has=page.get_by_role("link", name=bought["receipt_id"]))
    cells = row.get_by_role("cell")
    expect(cells.nth(1)).to_contain_text(bought["bundle"]["title"])
    expect(cells.nth(2)).to_have_text(bought["billing"]["amount"])
    expect(cells.nth(3)).to_have_text(bought["billing"]["currency"])
    expect(cells.nth(4)).to_have_text(
        f"{bought['billing']['cost_estimate']} {bought['billing']['cost_currency']}"
    )

    assert_fits(page)
    link.click()
    page.wait_for_load_state()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Receipt {bought['receipt_id']}")


def test_finance_day_page_screenshot(host, bought, tab, tmp_path) -> None:
    t = tab(DESKTOP)
    t.open(day_url(host, bought["issued_at"][:10], page_size=5))
    expect(t.page.get_by_role("table", name=re.compile("receipts issued on"))).to_be_visible()
    assert_fits(t.page)
    screenshot(t.page, tmp_path, "finance-desktop", "finance-page.png")


def test_finance_day_page_paginates_in_the_browser(host, bought, tab, tmp_path) -> None:
    day = bought["issued_at"][:10]
    t = tab(PHONE)
    t.open(day_url(host, day, page_size=1))
    page = t.page
    first = page.locator("tbody th a").all_inner_texts()
    assert len(first) == 1
    next_page = page.get_by_role("link", name="Next page")
    expect(next_page).to_have_attribute("href", re.compile(rf"^\?date={day}&page_size=1&cursor=[\w%-]+$"))
    assert_fits(page)
    screenshot(page, tmp_path, "finance-phone")
    next_page.click()
    page.wait_for_load_state()
    assert page.url.startswith(day_url(host, day, page_size=1) + "&cursor=")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Receipts of {day}")
    second = page.locator("tbody th a").all_inner_texts()
    assert len(second) == 1 and second != first


def test_empty_day_page(host, tab) -> None:
    t = tab(DESKTOP, bypass_csp=True)
    t.open(day_url(host, "2001-01-01"))
    expect(t.page.get_by_text("No receipts were issued on 2001-01-01.")).to_be_visible()
    assert_accessible(t.page)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_finance_day_page_passes_axe(host, bought, tab, viewport) -> None:
    t = tab(viewport, bypass_csp=True)
    t.open(day_url(host, bought["issued_at"][:10], page_size=5))
    expect(t.page.get_by_role("table")).to_be_visible()
    assert_accessible(t.page)


# ----- the not-found page -------------------------------------------------------------------------


def test_missing_receipt_page(host, tab, tmp_path) -> None:
    url = receipt_url(host, MISSING_ID)
    t = tab(PHONE)
    response = t.open(url)
    assert response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert_loads_only_itself(t, url, 404)
    expect(t.page.get_by_role("heading", level=1)).to_have_text("Receipt not found")
    expect(t.page.get_by_text("No receipt has this id.")).to_be_visible()
    screenshot(t.page, tmp_path, "not-found-phone")

    checked = tab(DESKTOP, bypass_csp=True)
    checked.open(url)
    assert_accessible(checked.page)


# ----- a failure receipt --------------------------------------------------------------------------


def test_refused_receipt_page_renders_and_passes_axe(host, tab, tmp_path) -> None:
    """Failure receipts are answered, not stored, so no URL serves them: render a real one (refused
    by the input schema, signature checked against the host's JWKS) straight into the browser."""
    answer = Buyer(host.url).purchase({"email": "not-an-address"}, headers={"User-Agent": USER_AGENT})
    assert 400 <= answer.status_code < 500, answer.text
    receipt = answer.json()
    assert receipt["status"] == "refused" and receipt["bundle"] is None and receipt["buyer"] is None
    jwks = requests.get(f"{host.url}/api/.well-known/jwks.json", timeout=10).json()
    verdict = signatures.verify(answer.content, jwks)
    assert verdict.valid, verdict

    t = tab(PHONE, bypass_csp=True)
    t.page.set_content(pages.receipt_page(receipt, verdict))
    page = t.page
    expect(page.get_by_role("heading", name="Why this purchase did not complete")).to_be_visible()
    audit = fields(page, "audit")
    assert audit["Error code"] == receipt["error"]["code"]
    assert audit["Message"] == receipt["error"]["message"]
    assert audit["Status"].endswith("Refused")
    assert page.locator("#signature-status").inner_text().strip() == "✓ Verified"
    assert fields(page, "billing")["Bundle"] == "No bundle"
    expect(page.get_by_role("table", name=re.compile("runtime checks")).locator("tbody tr")).to_have_count(6)
    assert_fits(page)
    screenshot(page, tmp_path, "refused-phone")
    assert_accessible(t.page)
