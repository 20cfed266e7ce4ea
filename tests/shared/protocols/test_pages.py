"""The HTML views (shared/protocols/pages.py) as pure functions: structure, content, escaping and the rule
that a page loads nothing and runs nothing. The same pages in a real browser, with an accessibility
audit, are in test_receipt_pages_browser.py."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from shared.protocols import pages
from shared.purchase.receipt.document import CHECK_NAMES
from shared.purchase.receipt.signatures import Verdict
from shared.seams.ledger import DayListing, LedgerEntry

RECEIPT_ID = "rcpt_3356oymxvrlcnfepn66by6fqyy"
KID = "Xk3v9l2QeJm0xJbq6Vb1kq0n1nQm3bZpQm0xJ9a3sT8"
BUYER_ID = "9f2c" * 16
INJECTED = '<script>alert("x")</script>'
ESCAPED = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
VERIFIED = Verdict(True, f"signed by the store's key {KID}", KID)
NOT_VERIFIED = Verdict(False, "the signature does not match the receipt's content", KID)


def fulfilled(**changes) -> dict:
    receipt = {
        "receipt_id": RECEIPT_ID,
        "version": 1,
        "issued_at": "2026-11-30T05:54:27Z",
        "operation": "purchase_free_bundle",
        "status": "fulfilled",
        "bundle": {"id": "agent-starter-kit", "title": "Agent Starter Kit"},
        "buyer": {"id": BUYER_ID, "hint": "a***@e***.org"},
        "billing": {"amount": "0.00", "currency": "USD", "cost_estimate": "0.01", "cost_currency": "USD"},
        "checks": [
            {"name": "idempotency", "result": "pass", "detail": "key claimed; a retry replays this receipt"},
            {"name": "input_schema", "result": "pass", "detail": "arguments match the input schema"},
            {"name": "rate_limit", "result": "degraded", "detail": "rate-limit store unreachable"},
            {"name": "cost_ceiling", "result": "pass", "detail": "within $5.00 per day"},
            {"name": "contact_upsert", "result": "skipped", "detail": "not reached"},
            {"name": "fulfillment_email", "result": "fail", "detail": "Brevo answered 502"},
        ],
        "receipt_url": f"http://localhost:7071/api/receipts/{RECEIPT_ID}",
        "download": {"token_id": "jti-4f1c2d", "expires_at": "2026-12-07T05:54:27Z"},
        "error": None,
        "caller": {"channel": "mcp", "user_agent": "agent-sdk/1.2 (test)"},
        "signature": {"alg": "ES256", "kid": KID, "jws": "eyJhbGciOiJFUzI1NiJ9..c2ln"},
    }
    return {**receipt, **changes}


def refused(status: str = "refused") -> dict:
    return fulfilled(
        status=status,
        bundle=None,
        buyer=None,
        download=None,
        receipt_url=None,
        billing={"amount": "0.00", "currency": "USD", "cost_estimate": "0.00", "cost_currency": "USD"},
        checks=[
            {"name": "idempotency", "result": "skipped", "detail": "no key given"},
            {"name": "input_schema", "result": "fail", "detail": "email is not an address"},
            *({"name": n, "result": "skipped", "detail": "not reached"} for n in CHECK_NAMES[2:]),
        ],
        error={"code": "invalid_input", "message": "email is not an address", "retry_after_seconds": None},
        signature=None,
    )


def entry(n: int, **changes) -> LedgerEntry:
    values = {
        "receipt_id": f"rcpt_{'a' * 25}{n}",
        "issued_at": f"2026-11-30T0{n}:15:00Z",
        "bundle_id": "agent-starter-kit",
        "bundle_title": "Agent Starter Kit",
        "amount": "0.00",
        "currency": "USD",
        "cost_estimate": "0.01",
        "cost_currency": "USD",
    }
    return LedgerEntry(**{**values, **changes})


def listing(receipts=None, *, cursor: str | None = None, count: int | None = None, totals=None) -> DayListing:
    receipts = [entry(1), entry(2)] if receipts is None else receipts
    if totals is None:
        totals = {"USD": {"amount": "0.00", "cost_estimate": "0.03"}} if receipts else {}
    return DayListing("2026-11-30", receipts, len(receipts) if count is None else count, totals, cursor)


class Parsed(HTMLParser):
    """The parts of a page the tests look at: elements with attributes, headings, visible text."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.headings: list[tuple[int, str]] = []
        self.text_parts: list[str] = []
        self._heading: list | None = None
        self._skip = 0
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = [int(tag[1]), ""]
        if tag in ("style", "title"):
            self._skip += 1

    def handle_endtag(self, tag):
        if re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.headings.append((self._heading[0], " ".join(self._heading[1].split())))
            self._heading = None
        if tag in ("style", "title"):
            self._skip -= 1

    def handle_data(self, data):
        if self._heading is not None:
            self._heading[1] += data
        if not self._skip:
            self.text_parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.text_parts).split())

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.elements if tag == name]


def all_pages() -> dict[str, str]:
    return {
        "fulfilled": pages.receipt_page(fulfilled(), VERIFIED),
        "refused": pages.receipt_page(refused(), NOT_VERIFIED),
        "failed": pages.receipt_page(refused("failed"), Verdict(False, "the receipt carries no signature")),
        "day": pages.day_page(listing(cursor="c2tpcA"), 2),
        "empty day": pages.day_page(listing([]), 50),
        "message": pages.message_page("Receipt not found", "No receipt has this id."),
    }


# ----- receipt ------------------------------------------------------------------------------------


def test_receipt_page_has_both_sections_and_all_six_checks() -> None:
    page = Parsed(pages.receipt_page(fulfilled(), VERIFIED))
    assert (1, f"Receipt {RECEIPT_ID}") in page.headings
    assert (2, "Security audit") in page.headings
    assert (2, "Finance billing view") in page.headings
    rows = [a for a in page.tags("th") if a.get("scope") == "row"]
    assert len(rows) == 6
    for label in ("Idempotency", "Input schema", "Rate limit", "Cost ceiling", "Contact upsert"):
        assert label in page.text
    for name in CHECK_NAMES:
        assert name in page.text
    for detail in ("key claimed; a retry replays this receipt", "rate-limit store unreachable"):
        assert detail in page.text


def test_check_results_are_words_not_colour_alone() -> None:
    text = Parsed(pages.receipt_page(fulfilled(), VERIFIED)).text
    for word in ("Pass", "Fail", "Skipped", "Degraded"):
        assert re.search(rf"\b{word}\b", text), word


def test_security_audit_shows_request_and_signature_facts() -> None:
    text = Parsed(pages.receipt_page(fulfilled(), VERIFIED)).text
    assert "Idempotency outcome" in text
    assert "key claimed; a retry replays this receipt" in text
    assert "MCP" in text
    assert "agent-sdk/1.2 (test)" in text
    assert "2026-11-30 05:54:27 UTC" in text  # issued_at
    assert "2026-12-07 05:54:27 UTC" in text  # download token expiry
    assert "jti-4f1c2d" in text
    assert "Fulfilled" in text
    assert f"signed by the store's key {KID}" in text
    assert KID in text and "ES256" in text


def test_times_keep_their_exact_value_in_a_time_element() -> None:
    page = Parsed(pages.receipt_page(fulfilled(), VERIFIED))
    datetimes = {a.get("datetime") for a in page.tags("time")}
    assert {"2026-11-30T05:54:27Z", "2026-12-07T05:54:27Z"} <= datetimes


def test_finance_billing_view_lists_the_billing_figures() -> None:
    page = pages.receipt_page(fulfilled(), VERIFIED)
    billing = page[page.index('id="billing"') :]
    text = Parsed(billing).text
    for label, value in (
        ("Bundle", "Agent Starter Kit"),
        ("Bundle id", "agent-starter-kit"),
        ("Amount", "0.00"),
        ("Currency", "USD"),
        ("Cost estimate", "0.01"),
        ("Cost currency", "USD"),
        ("Receipt id", RECEIPT_ID),
        ("Issued at", "2026-11-30 05:54:27 UTC"),
    ):
        assert f"{label} {value}" in text, label


def test_buyer_is_shown_only_as_its_hint_and_hash() -> None:
    text = Parsed(pages.receipt_page(fulfilled(), VERIFIED)).text
    assert "a***@e***.org" in text
    assert BUYER_ID in text
    assert "email" not in text.lower().replace("fulfillment email", "").replace("fulfillment_email", "")


@pytest.mark.parametrize("status", ["refused", "failed"])
def test_failure_receipt_renders_with_its_error(status: str) -> None:
    receipt = refused(status)
    receipt["error"]["retry_after_seconds"] = 30
    page = Parsed(pages.receipt_page(receipt, Verdict(False, "the receipt carries no signature")))
    text = page.text
    assert status.capitalize() in text
    assert "invalid_input" in text and "email is not an address" in text
    assert "Retry after 30 seconds" in text
    assert "No bundle" in text
    assert "No token issued" in text
    assert "Not recorded (no buyer was identified)" in text
    assert "Not verified" in text
    assert len([a for a in page.tags("th") if a.get("scope") == "row"]) == 6
    assert (2, "Security audit") in page.headings and (2, "Finance billing view") in page.headings


def test_signature_status_is_in_words() -> None:
    good = Parsed(pages.receipt_page(fulfilled(), VERIFIED)).text
    bad = Parsed(pages.receipt_page(fulfilled(), NOT_VERIFIED)).text
    assert "Verification ✓ Verified" in good
    assert "Not verified" not in good
    assert "Verification ✗ Not verified" in bad
    assert "the signature does not match the receipt's content" in bad


def test_every_receipt_value_is_escaped() -> None:
    receipt = fulfilled(
        receipt_id=INJECTED,
        bundle={"id": INJECTED, "title": INJECTED},
        buyer={"id": INJECTED, "hint": INJECTED},
        billing={"amount": INJECTED, "currency": INJECTED, "cost_estimate": INJECTED, "cost_currency": "X"},
        checks=[{"name": n, "result": INJECTED, "detail": INJECTED} for n in CHECK_NAMES],
        caller={"channel": INJECTED, "user_agent": INJECTED},
        download={"token_id": INJECTED, "expires_at": INJECTED},
        error={"code": INJECTED, "message": INJECTED, "retry_after_seconds": INJECTED},
        signature={"alg": INJECTED, "kid": INJECTED, "jws": "x..y"},
        operation=INJECTED,
        version=INJECTED,
    )
    page = pages.receipt_page(receipt, Verdict(False, INJECTED, INJECTED))
    assert "<script" not in page
    assert page.count(ESCAPED) >= 20
    assert f"<title>Receipt {ESCAPED}" in page


def test_escaping_covers_attribute_quotes() -> None:
    quoted = '"><img src=x onerror=alert(1)>'
    page = pages.receipt_page(
        fulfilled(issued_at=quoted, caller={"channel": "mcp", "user_agent": quoted}), VERIFIED
    )
    assert "<img" not in page and "onerror=alert(1)>" not in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page


CONTROL_CHARACTERS = "\x00\x1b\r\x07\u202e\u200b\u2028\u2029\x85\x9b"  # Cc, Cf, Zl, Zp


def test_control_and_format_characters_in_receipt_values_are_shown_as_escapes() -> None:
    forged = f"agent{CONTROL_CHARACTERS}/1.0"
    page = pages.receipt_page(
        fulfilled(receipt_id=forged, caller={"channel": "mcp", "user_agent": forged}), VERIFIED
    )

    assert not any(char in page for char in CONTROL_CHARACTERS)
    shown = r"agent\x00\x1b\r\x07\u202e\u200b\u2028\u2029\x85\x9b/1.0"
    assert f"<code>{shown}</code>" in page
    assert f"<title>Receipt {shown}" in page


def test_issue_times_out_of_the_calendar_in_utc_are_shown_as_given() -> None:
    for issued_at in ("0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00"):
        page = Parsed(pages.receipt_page(fulfilled(issued_at=issued_at), VERIFIED))
        assert f"Issued {issued_at}" in page.text


def test_malformed_receipt_still_renders() -> None:
    page = Parsed(pages.receipt_page({"receipt_id": RECEIPT_ID, "checks": "nonsense"}, NOT_VERIFIED))
    assert (2, "Security audit") in page.headings and (2, "Finance billing view") in page.headings


# ----- a day's receipts ---------------------------------------------------------------------------


def test_day_page_shows_totals_and_a_row_per_receipt_linking_to_it() -> None:
    page = Parsed(
        pages.day_page(listing(count=7, totals={"USD": {"amount": "0.00", "cost_estimate": "0.07"}}), 2)
    )
    assert page.headings[0] == (1, "Receipts of 2026-11-30")
    assert (2, "Day totals") in page.headings
    text = page.text
    assert "Receipts 7" in text
    assert "Amount in USD 0.00 USD" in text
    assert "Cost estimate of USD receipts 0.07 USD" in text
    hrefs = [a.get("href") for a in page.tags("a")]
    assert f"/api/receipts/rcpt_{'a' * 25}1" in hrefs
    assert f"/api/receipts/rcpt_{'a' * 25}2" in hrefs
    assert "01:15:00 UTC" in text and "Agent Starter Kit" in text
    assert "2 of the 7 receipts issued on 2026-11-30" in text
    assert len([a for a in page.tags("th") if a.get("scope") == "row"]) == 2


def test_day_page_totals_per_currency() -> None:
    totals = {
        "EUR": {"amount": "12.50", "cost_estimate": "0.02"},
        "USD": {"amount": "3.00", "cost_estimate": "0.01"},
    }
    text = Parsed(pages.day_page(listing(count=3, totals=totals), 50)).text
    assert "Amount in EUR 12.50 EUR" in text
    assert "Amount in USD 3.00 USD" in text
    assert "Cost estimate of EUR receipts 0.02 USD" in text


def test_next_page_link_carries_date_size_and_encoded_cursor() -> None:
    cursor = "eyJuZXh0Ijo+/=&x y"
    raw = pages.day_page(listing(cursor=cursor), 2)
    links = [a for a in Parsed(raw).tags("a") if a.get("rel") == "next"]
    assert [a["href"] for a in links] == ["?date=2026-11-30&page_size=2&cursor=eyJuZXh0Ijo%2B%2F%3D%26x+y"]
    assert 'href="?date=2026-11-30&amp;page_size=2&amp;cursor=eyJuZXh0Ijo%2B%2F%3D%26x+y"' in raw
    assert "Next page" in Parsed(raw).text


def test_every_day_link_keeps_the_function_key_the_page_was_opened_with() -> None:
    page = Parsed(pages.day_page(listing(cursor="c1"), 2, code="key&1"))
    query_links = [a["href"] for a in page.tags("a") if a["href"].startswith("?")]
    assert len(query_links) == 3
    assert all(href.endswith("&code=key%261") for href in query_links)


@pytest.mark.parametrize(
    ("day", "links"),
    [
        ("0001-01-01", ["Next day (0001-01-02) \u2192"]),
        ("9999-12-31", ["\u2190 Previous day (9999-12-30)"]),
        ("2026-12-31", ["\u2190 Previous day (2026-12-30)", "Next day (2027-01-01) \u2192"]),
    ],
    ids=["first-day", "last-day", "year-end"],
)
def test_day_links_go_only_to_days_that_exist(day: str, links: list[str]) -> None:
    raw = pages.day_page(DayListing(day, [], 0, {}, None), 50)
    nav = Parsed(raw[raw.index('<nav class="days"') : raw.index("</nav>") + 6])

    assert nav.text == " ".join(links)
    assert len(nav.tags("a")) == len(links)


def test_no_next_page_link_on_the_last_page() -> None:
    page = Parsed(pages.day_page(listing(cursor=None), 2))
    assert not [a for a in page.tags("a") if a.get("rel") == "next"]
    assert "Next page" not in page.text


def test_empty_day_says_so() -> None:
    page = Parsed(pages.day_page(listing([]), 50))
    assert "No receipts were issued on 2026-11-30." in page.text
    assert "Receipts 0" in page.text
    assert not page.tags("table")


def test_day_page_values_are_escaped() -> None:
    bad = entry(1, bundle_title=INJECTED, bundle_id=INJECTED, receipt_id=INJECTED, currency=INJECTED)
    page = pages.day_page(
        DayListing(INJECTED, [bad], 1, {INJECTED: {"amount": INJECTED, "cost_estimate": "1"}}, INJECTED), 5
    )
    assert "<script" not in page
    assert ESCAPED in page
    assert "/api/receipts/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E" in page


# ----- every page ---------------------------------------------------------------------------------


def test_message_page() -> None:
    page = Parsed(pages.message_page("Download refused", "The link <expired> & is gone"))
    assert page.headings == [(1, "Download refused")]
    assert "The link <expired> & is gone" in page.text
    assert "&lt;expired&gt; &amp;" in pages.message_page("t", "<expired> &")


@pytest.mark.parametrize("name", list(all_pages()))
def test_page_is_a_complete_accessible_document(name: str) -> None:
    raw = all_pages()[name]
    page = Parsed(raw)
    assert raw.startswith("<!doctype html>")
    assert page.tags("html") == [{"lang": "en"}]
    assert any(
        a.get("name") == "viewport" and "width=device-width" in (a.get("content") or "")
        for a in page.tags("meta")
    )
    assert re.search(r"<title>[^<]+</title>", raw)
    assert len(page.tags("main")) == 1 and len(page.tags("header")) == 1
    levels = [level for level, _ in page.headings]
    assert levels.count(1) == 1 and levels[0] == 1
    assert all(b - a <= 1 for a, b in zip(levels, levels[1:], strict=False)), levels
    assert len(page.tags("caption")) == len(page.tags("table"))
    assert all(a.get("scope") in ("row", "col") for a in page.tags("th"))
    assert "@media print" in raw and "@media (max-width" in raw
    ids = [a["id"] for _, a in page.elements if a.get("id")]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", list(all_pages()))
def test_page_runs_no_script_and_loads_nothing(name: str) -> None:
    raw = all_pages()[name]
    page = Parsed(raw)
    assert "<script" not in raw.lower()
    assert not re.search(r"\bsrc\s*=", raw, re.I)
    assert not re.search(r"""href\s*=\s*["']?\s*(https?:)?//""", raw, re.I)
    assert "url(" not in raw and "@import" not in raw
    assert not re.search(r"\son[a-z]+\s*=", raw, re.I)  # no inline event handlers
    for tag in ("img", "iframe", "object", "embed", "link", "form", "base"):
        assert not page.tags(tag), tag
    for attrs in page.tags("a"):
        assert attrs["href"].startswith(("/", "?")), attrs
