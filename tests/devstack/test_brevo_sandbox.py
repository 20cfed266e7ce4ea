"""Black-box tests for the Brevo sandbox (devstack/brevo_sandbox/) over real HTTP.

The module-scoped ``sandbox_url`` fixture runs its own ``python -m
devstack.brevo_sandbox`` subprocess (not the suite's shared one from conftest), so
every test here can reset it and start from an empty sandbox.
"""

from __future__ import annotations

import http.client
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from devstack import processes
from devstack.brevo_sandbox.server import make_server
from devstack.ports import free_port
from tests.support import HANG_SECONDS, ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

API_KEY = {"api-key": "test-key"}
LISTENING_RE = re.compile(r"^Brevo sandbox listening on http://([\d.]+):(\d+)$")
MESSAGE_ID_RE = re.compile(r"^<[0-9a-f-]{36}@smtp-relay\.mailin\.fr>$")


def _read_line(stream: Any, timeout: float) -> str:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()))
    reader.daemon = True
    reader.start()
    reader.join(timeout)
    return lines[0].strip() if lines else ""


def _start_sandbox(stderr: Any, *extra: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = processes.start(
        [sys.executable, "-m", "devstack.brevo_sandbox", "--port", str(port), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    line = _read_line(proc.stdout, timeout=10)
    if not LISTENING_RE.match(line):
        proc.kill()
        pytest.fail(f"sandbox did not start, first line was {line!r}")
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen[str]) -> int:
    processes.stop(proc, grace=5)
    return proc.returncode


@pytest.fixture(scope="module")
def sandbox_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("brevo_sandbox") / "stderr.log"


@pytest.fixture(scope="module")
def sandbox_url(sandbox_log: Path) -> Iterator[str]:
    with sandbox_log.open("w") as stderr:
        proc, base_url = _start_sandbox(stderr)
        yield base_url
        _stop(proc)


@pytest.fixture
def base(sandbox_url: str) -> str:
    requests.post(f"{sandbox_url}/_sandbox/reset", timeout=5).raise_for_status()
    return sandbox_url


def post_contact(base: str, payload: Any, **kwargs: Any) -> requests.Response:
    headers = kwargs.pop("headers", API_KEY)
    return requests.post(f"{base}/v3/contacts", json=payload, headers=headers, timeout=5, **kwargs)


def post_email(base: str, payload: Any, **kwargs: Any) -> requests.Response:
    headers = kwargs.pop("headers", API_KEY)
    timeout = kwargs.pop("timeout", 5)
    return requests.post(f"{base}/v3/smtp/email", json=payload, headers=headers, timeout=timeout)


def email_payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "sender": {"email": "shop@example.com", "name": "Shop"},
        "to": [{"email": "Customer@Example.com", "name": "Cus Tomer"}],
        "subject": "Your order",
        "htmlContent": "<p>Thanks!</p>",
    }
    payload.update(overrides)
    return payload


def get_json(base: str, path: str, **params: str) -> Any:
    response = requests.get(f"{base}{path}", params=params, timeout=5)
    response.raise_for_status()
    return response.json()


def add_fault(base: str, **spec: Any) -> requests.Response:
    return requests.post(f"{base}/_sandbox/faults", json=spec, timeout=5)


def assert_error(response: requests.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == code
    assert isinstance(body["message"], str) and body["message"]


# --- contacts -------------------------------------------------------------------


def test_contact_is_created_then_upserted_then_rejected_as_duplicate(base: str) -> None:
    created = post_contact(base, {"email": "Ann@Example.com", "attributes": {"A": 1}})
    assert created.status_code == 201
    assert isinstance(created.json()["id"], int)

    upserted = post_contact(
        base,
        {
            "email": "ann@example.com",
            "attributes": {"B": 2},
            "listIds": [7],
            "updateEnabled": True,
        },
    )
    assert upserted.status_code == 204
    assert upserted.content == b""

    duplicate = post_contact(base, {"email": "ANN@example.com"})
    assert_error(duplicate, 400, "duplicate_parameter")
    assert duplicate.json()["message"] == (
        "Unable to create contact, email is already associated with another Contact"
    )

    [contact] = get_json(base, "/_sandbox/contacts", email="ann@EXAMPLE.com")
    assert contact["id"] == created.json()["id"]
    assert contact["email"] == "ann@example.com"
    assert contact["attributes"] == {"A": 1, "B": 2}
    assert contact["listIds"] == [7]
    assert contact["upserts"] == 2


def test_creating_an_existing_contact_changes_nothing_and_answers_as_brevo_does(base: str) -> None:
    post_contact(base, {"email": "ann@example.com", "attributes": {"FIRSTNAME": "Ann"}, "listIds": [7]})
    [before] = get_json(base, "/_sandbox/contacts", email="ann@example.com")

    duplicate = post_contact(
        base, {"email": "Ann@Example.com", "attributes": {"FIRSTNAME": "Mallory", "X": 1}, "listIds": [9]}
    )

    assert duplicate.status_code == 400
    assert duplicate.json() == {
        "code": "duplicate_parameter",
        "message": "Unable to create contact, email is already associated with another Contact",
        "metadata": {"duplicate_identifiers": ["email"]},
    }
    assert get_json(base, "/_sandbox/contacts", email="ann@example.com") == [before]
    assert before["attributes"] == {"FIRSTNAME": "Ann"} and before["listIds"] == [7]
    assert get_json(base, "/_sandbox/stats")["contact_upserts"] == 1


def test_contact_ids_increment(base: str) -> None:
    first = post_contact(base, {"email": "one@example.com"}).json()["id"]
    second = post_contact(base, {"email": "two@example.com"}).json()["id"]
    assert second == first + 1


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"email": "not-an-email"},
        {"email": "a@b.co", "attributes": "x"},
        {"email": "a@b.co", "listIds": ["1"]},
        {"email": "a@b.co", "updateEnabled": "yes"},
    ],
)
def test_invalid_contact_is_rejected(base: str, payload: dict[str, Any]) -> None:
    assert_error(post_contact(base, payload), 400, "invalid_parameter")
    assert get_json(base, "/_sandbox/contacts") == []


# --- authentication -------------------------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"api-key": ""}])
def test_missing_api_key_is_rejected_with_401(base: str, headers: dict[str, str]) -> None:
    for response in (
        post_contact(base, {"email": "a@b.co"}, headers=headers),
        post_email(base, email_payload(), headers=headers),
    ):
        assert response.status_code == 401
        assert response.json() == {"code": "unauthorized", "message": "Key not found"}
    assert get_json(base, "/_sandbox/contacts") == []
    assert get_json(base, "/_sandbox/emails") == []


def test_configured_api_key_rejects_any_other_key() -> None:
    server = make_server("127.0.0.1", 0, api_key="right-key")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = "http://{}:{}/v3/contacts".format(*server.server_address[:2])
    try:
        wrong = requests.post(url, json={"email": "a@b.co"}, headers={"api-key": "wrong"}, timeout=5)
        right = requests.post(url, json={"email": "a@b.co"}, headers={"api-key": "right-key"}, timeout=5)
    finally:
        server.shutdown()
        server.server_close()
    assert wrong.status_code == 401
    assert wrong.json() == {"code": "unauthorized", "message": "Key not found"}
    assert right.status_code == 201


# --- transactional email ------------------------------------------------------------


def test_sent_email_is_captured_with_links_and_listed_on_index_page(base: str) -> None:
    html_content = (
        '<p>Track <a href="https://shop.example/orders/42?a=1&amp;b=2">here</a> '
        "or read https://shop.example/help.</p>"
    )
    response = post_email(
        base,
        email_payload(
            subject="Order <42> & more",
            htmlContent=html_content,
            textContent="Unsubscribe: http://shop.example/unsubscribe",
            params={"ORDER": 42},
            tags=["order"],
        ),
    )
    assert response.status_code == 201
    message_id = response.json()["messageId"]
    assert MESSAGE_ID_RE.match(message_id)

    [email] = get_json(base, "/_sandbox/emails", to="customer@example.COM")
    assert email["messageId"] == message_id
    assert email["subject"] == "Order <42> & more"
    assert email["params"] == {"ORDER": 42}
    assert email["links"] == [
        "https://shop.example/orders/42?a=1&b=2",
        "https://shop.example/help",
        "http://shop.example/unsubscribe",
    ]
    assert email["received_at"].endswith("Z")
    assert get_json(base, "/_sandbox/emails", to="someone@else.com") == []

    page = requests.get(f"{base}/", timeout=5)
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert "<title>" in page.text
    assert "Order &lt;42&gt; &amp; more" in page.text
    assert "Order <42>" not in page.text
    assert '<a href="https://shop.example/orders/42?a=1&amp;b=2"' in page.text
    assert '<a href="http://shop.example/unsubscribe"' in page.text


def test_index_page_lists_newest_email_first(base: str) -> None:
    post_email(base, email_payload(subject="first-subject"))
    post_email(base, email_payload(subject="second-subject"))
    page = requests.get(f"{base}/", timeout=5).text
    assert page.index("second-subject") < page.index("first-subject")


def test_email_page_shows_html_in_sandboxed_iframe(base: str) -> None:
    post_email(base, email_payload(htmlContent='<p class="x">Hi</p><script>x()</script>'))
    [email] = get_json(base, "/_sandbox/emails")

    page = requests.get(f"{base}/emails/{email['id']}", timeout=5)
    assert page.status_code == 200
    assert (
        '<iframe sandbox srcdoc="&lt;p class=&quot;x&quot;&gt;Hi&lt;/p&gt;'
        '&lt;script&gt;x()&lt;/script&gt;"></iframe>'
    ) in page.text
    assert "<script>" not in page.text
    assert requests.get(f"{base}/emails/999", timeout=5).status_code == 404


def test_text_only_email_is_shown_in_pre(base: str) -> None:
    post_email(base, email_payload(htmlContent=None, textContent="a < b"))
    [email] = get_json(base, "/_sandbox/emails")
    page = requests.get(f"{base}/emails/{email['id']}", timeout=5).text
    assert "<pre>a &lt; b</pre>" in page
    assert "<iframe" not in page


def test_template_email_needs_no_subject_or_content(base: str) -> None:
    payload = email_payload(templateId=3, params={"NAME": "Ann"})
    del payload["subject"], payload["htmlContent"]
    assert post_email(base, payload).status_code == 201
    [email] = get_json(base, "/_sandbox/emails")
    assert email["templateId"] == 3
    assert email["params"] == {"NAME": "Ann"}


def test_duplicate_idempotency_key_is_rejected_and_not_captured_twice(
    base: str,
) -> None:
    key = str(uuid.uuid4())
    payload = email_payload(headers={"idempotencyKey": key})
    assert post_email(base, payload).status_code == 201

    repeat = post_email(base, payload)
    assert_error(repeat, 400, "duplicate_parameter")
    assert len(get_json(base, "/_sandbox/emails")) == 1

    other_key = email_payload(headers={"idempotencyKey": str(uuid.uuid4())})
    assert post_email(base, other_key).status_code == 201


def test_non_uuid_idempotency_key_is_rejected(base: str) -> None:
    payload = email_payload(headers={"idempotencyKey": "order-42"})
    assert_error(post_email(base, payload), 400, "invalid_parameter")
    assert get_json(base, "/_sandbox/emails") == []


def _without(key: str) -> dict[str, Any]:
    payload = email_payload()
    del payload[key]
    return payload


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (_without("sender"), "missing_parameter"),
        (email_payload(sender={"name": "No address"}), "missing_parameter"),
        (email_payload(sender={"email": "nope"}), "invalid_parameter"),
        (_without("to"), "missing_parameter"),
        (email_payload(to=[]), "invalid_parameter"),
        (email_payload(to="customer@example.com"), "invalid_parameter"),
        (email_payload(to=[{"name": "No address"}]), "missing_parameter"),
        (_without("subject"), "missing_parameter"),
        (_without("htmlContent"), "missing_parameter"),
        (email_payload(templateId="7"), "invalid_parameter"),
        (email_payload(params=[1]), "invalid_parameter"),
    ],
    ids=[
        "no-sender",
        "sender-without-email",
        "sender-bad-email",
        "no-to",
        "empty-to",
        "to-not-list",
        "recipient-without-email",
        "no-subject",
        "no-content",
        "template-id-not-int",
        "params-not-object",
    ],
)
def test_invalid_email_is_rejected(base: str, payload: dict[str, Any], code: str) -> None:
    assert_error(post_email(base, payload), 400, code)
    assert get_json(base, "/_sandbox/emails") == []


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"text"', b""])
def test_body_that_is_not_a_json_object_is_bad_request(base: str, body: bytes) -> None:
    for path in ("/v3/contacts", "/v3/smtp/email"):
        response = requests.post(f"{base}{path}", data=body, headers=API_KEY, timeout=5)
        assert_error(response, 400, "bad_request")


def test_unknown_path_is_404_and_wrong_method_is_405(base: str) -> None:
    assert_error(
        requests.get(f"{base}/v3/nothing-here", headers=API_KEY, timeout=5),
        404,
        "not_found",
    )
    assert_error(requests.get(f"{base}/nope", timeout=5), 404, "not_found")
    wrong_method = requests.get(f"{base}/v3/smtp/email", headers=API_KEY, timeout=5)
    assert_error(wrong_method, 405, "method_not_allowed")
    assert wrong_method.headers["Allow"] == "POST"
    assert_error(requests.put(f"{base}/_sandbox/stats", timeout=5), 405, "method_not_allowed")


# --- fault injection ------------------------------------------------------------------


def test_injected_fault_fails_one_matching_request_then_recovers(base: str) -> None:
    created = add_fault(base, path="/v3/smtp/email", status=503, times=1, match="fail-me@example.com")
    assert created.status_code == 201
    assert isinstance(created.json()["id"], int)

    unaffected = email_payload(to=[{"email": "fine@example.com"}])
    assert post_email(base, unaffected).status_code == 201

    key = str(uuid.uuid4())
    target = email_payload(to=[{"email": "fail-me@example.com"}], headers={"idempotencyKey": key})
    failed = post_email(base, target)
    assert failed.status_code == 503
    assert failed.json() == {"code": "internal_error", "message": "Injected fault"}
    assert get_json(base, "/_sandbox/emails", to="fail-me@example.com") == []

    # The retry reuses the idempotency key: the faulted attempt must not count.
    assert post_email(base, target).status_code == 201
    assert len(get_json(base, "/_sandbox/emails", to="fail-me@example.com")) == 1


def test_fault_with_custom_body_applies_to_contacts(base: str) -> None:
    body = {"code": "too_many_requests", "message": "slow down"}
    add_fault(base, path="/v3/contacts", status=429, times=2, body=body)
    for _ in range(2):
        response = post_contact(base, {"email": "a@b.co"})
        assert response.status_code == 429
        assert response.json() == body
    assert get_json(base, "/_sandbox/contacts") == []
    assert post_contact(base, {"email": "a@b.co"}).status_code == 201


def test_cleared_faults_no_longer_fire(base: str) -> None:
    add_fault(base, path="/v3/smtp/email", status=500, times=5)
    assert requests.delete(f"{base}/_sandbox/faults", timeout=5).status_code == 204
    assert post_email(base, email_payload()).status_code == 201


def test_delay_fault_makes_client_time_out_then_request_is_handled(base: str) -> None:
    add_fault(base, path="/v3/smtp/email", status=None, delay_seconds=1.5)
    with pytest.raises(requests.exceptions.Timeout):
        post_email(base, email_payload(), timeout=0.5)

    # The server finishes the slow request after its delay, like a real timeout.
    deadline = time.monotonic() + 5
    while not get_json(base, "/_sandbox/emails") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(get_json(base, "/_sandbox/emails")) == 1
    assert post_email(base, email_payload(), timeout=0.5).status_code == 201


@pytest.mark.parametrize(
    "spec",
    [
        {"path": "/v3/unknown", "status": 500},
        {"path": "/v3/smtp/email", "status": 200},
        {"path": "/v3/smtp/email", "status": 500, "times": 0},
        {"path": "/v3/smtp/email"},
        {"path": "/v3/smtp/email", "status": 500, "body": "oops"},
    ],
)
def test_invalid_fault_spec_is_rejected(base: str, spec: dict[str, Any]) -> None:
    assert_error(add_fault(base, **spec), 400, "invalid_parameter")
    assert get_json(base, "/_sandbox/faults") == []


# --- counters, reset, transport ---------------------------------------------------------


def test_stats_count_all_requests_and_outcomes(base: str) -> None:
    post_contact(base, {"email": "a@b.co"})
    post_contact(base, {"email": "a@b.co", "updateEnabled": True})
    post_contact(base, {"email": "a@b.co"})  # duplicate
    post_contact(base, {"email": "a@b.co"}, headers={})  # unauthorized
    key = email_payload(headers={"idempotencyKey": str(uuid.uuid4())})
    post_email(base, key)
    post_email(base, key)  # duplicate
    post_email(base, _without("subject"))  # invalid

    assert get_json(base, "/_sandbox/stats") == {
        "requests": {"/v3/contacts": 4, "/v3/contacts/import": 0, "/v3/smtp/email": 3, "/v3/smtp/emails": 0},
        "contact_upserts": 2,
        "emails_accepted": 1,
        "emails_rejected_duplicate": 1,
        "imports": 0,
        "contacts_imported": 0,
    }


def test_reset_clears_emails_contacts_faults_counters_and_keys(base: str) -> None:
    key = email_payload(headers={"idempotencyKey": str(uuid.uuid4())})
    post_email(base, key)
    post_contact(base, {"email": "a@b.co"})
    add_fault(base, path="/v3/contacts", status=500)

    assert requests.post(f"{base}/_sandbox/reset", timeout=5).status_code == 204

    assert get_json(base, "/_sandbox/emails") == []
    assert get_json(base, "/_sandbox/contacts") == []
    assert get_json(base, "/_sandbox/faults") == []
    assert get_json(base, "/_sandbox/stats")["requests"] == {
        "/v3/contacts": 0,
        "/v3/contacts/import": 0,
        "/v3/smtp/email": 0,
        "/v3/smtp/emails": 0,
    }
    assert post_contact(base, {"email": "a@b.co"}).status_code == 201
    assert post_email(base, key).status_code == 201


def test_concurrent_emails_are_all_captured_with_unique_ids(base: str) -> None:
    def send(i: int) -> int:
        payload = email_payload(to=[{"email": f"user{i}@example.com"}])
        return post_email(base, payload).status_code

    with ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(pool.map(send, range(64)))
    assert statuses == [201] * 64
    emails = get_json(base, "/_sandbox/emails")
    assert len({e["id"] for e in emails}) == 64
    assert len({e["messageId"] for e in emails}) == 64
    assert get_json(base, "/_sandbox/stats")["emails_accepted"] == 64


def test_keep_alive_connection_survives_errors_and_empty_responses(base: str) -> None:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    body = b'{"email": "keep@alive.io"}'
    calls = [
        ("POST", "/v3/contacts", {}, 401),
        ("POST", "/v3/contacts", API_KEY, 201),
        ("POST", "/v3/contacts", {**API_KEY, "x": "1"}, 400),
        ("GET", "/_sandbox/stats", {}, 200),
        ("GET", "/nope", {}, 404),
        ("GET", "/", {}, 200),
    ]
    sock = None
    try:
        for method, path, headers, status in calls:
            payload = body if method == "POST" else None
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == status
            assert response.getheader("Content-Length") is not None
            sock = sock or conn.sock
            assert conn.sock is sock, f"connection was closed after {method} {path}"
        upsert = b'{"email": "keep@alive.io", "updateEnabled": true}'
        conn.request("POST", "/v3/contacts", body=upsert, headers=API_KEY)
        response = conn.getresponse()
        assert response.status == 204
        assert response.read() == b""
        conn.request("GET", "/_sandbox/stats")
        assert conn.getresponse().status == 200
        assert conn.sock is sock
    finally:
        conn.close()


def test_log_has_one_line_per_request_and_no_bodies(base: str, sandbox_log: Path) -> None:
    secret = f"secret-{uuid.uuid4()}"
    post_email(base, email_payload(subject=secret))
    post_contact(base, {"email": "a@b.co"}, headers={})
    deadline = time.monotonic() + 5
    while "POST /v3/contacts 401\n" not in sandbox_log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = sandbox_log.read_text()
    assert "POST /v3/smtp/email 201\n" in log
    assert "POST /v3/contacts 401\n" in log
    assert secret not in log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_server_cleanly(sig: signal.Signals) -> None:
    proc, base_url = _start_sandbox(subprocess.DEVNULL)
    assert requests.get(f"{base_url}/_sandbox/stats", timeout=5).status_code == 200
    proc.send_signal(sig)
    try:
        assert proc.wait(timeout=HANG_SECONDS) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


# --- the transactional log and Brevo's memory of idempotency keys ----------------------------------


def email_log(base: str, **params: Any) -> requests.Response:
    return requests.get(f"{base}/v3/smtp/emails", params=params, headers=API_KEY, timeout=5)


def test_the_log_lists_emails_to_one_address_newest_first_with_their_tags(base: str) -> None:
    first = post_email(base, email_payload(tags=["storefront", "purchase-1"])).json()["messageId"]
    post_email(base, email_payload(to=[{"email": "someone.else@example.com"}]))
    second = post_email(base, email_payload(subject="Again")).json()["messageId"]

    answer = email_log(base, email="customer@example.com")

    assert answer.status_code == 200
    log = answer.json()
    assert log["count"] == 2
    assert [e["messageId"] for e in log["transactionalEmails"]] == [second, first]
    newest, oldest = log["transactionalEmails"]
    assert oldest["tags"] == ["storefront", "purchase-1"] and "tags" not in newest
    assert oldest["email"] == "Customer@Example.com" and oldest["subject"] == "Your order"
    assert oldest["from"] == "shop@example.com"
    assert set(oldest) == {"email", "subject", "messageId", "uuid", "date", "from", "tags"}
    assert [
        e["messageId"]
        for e in email_log(base, email="customer@example.com", sort="asc").json()["transactionalEmails"]
    ] == [first, second]


def test_the_log_pages_with_limit_and_offset_and_filters_by_message_id(base: str) -> None:
    ids = [post_email(base, email_payload()).json()["messageId"] for _ in range(5)]

    page = email_log(base, email="customer@example.com", limit="2", offset="1").json()
    by_id = email_log(base, messageId=ids[2]).json()

    assert page["count"] == 5
    assert [e["messageId"] for e in page["transactionalEmails"]] == [ids[3], ids[2]]
    assert [e["messageId"] for e in by_id["transactionalEmails"]] == [ids[2]]


def test_the_log_honours_the_date_range(base: str) -> None:
    post_email(base, email_payload())
    today = time.strftime("%Y-%m-%d", time.gmtime())

    within = email_log(base, email="customer@example.com", startDate=today, endDate=today).json()
    before = email_log(
        base, email="customer@example.com", startDate="2020-01-01", endDate="2020-01-31"
    ).json()

    assert within["count"] == 1
    assert before == {"count": 0, "transactionalEmails": []}


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, "missing_parameter"),
        ({"email": "a@b.co", "startDate": "2026-01-01"}, "missing_parameter"),
        ({"email": "a@b.co", "startDate": "2026-01-01", "endDate": "2026-03-01"}, "invalid_parameter"),
        ({"email": "a@b.co", "startDate": "2026-02-01", "endDate": "2026-01-01"}, "invalid_parameter"),
        ({"email": "a@b.co", "startDate": "2026-02-30", "endDate": "2026-03-01"}, "invalid_parameter"),
        ({"email": "a@b.co", "startDate": "yesterday", "endDate": "2026-03-01"}, "invalid_parameter"),
        ({"email": "a@b.co", "limit": "5000"}, "invalid_parameter"),
        ({"email": "a@b.co", "limit": "-1"}, "invalid_parameter"),
        ({"email": "a@b.co", "offset": "\u00b2"}, "invalid_parameter"),
        ({"email": "a@b.co", "sort": "newest"}, "invalid_parameter"),
        ({"templateId": "x"}, "invalid_parameter"),
    ],
)
def test_a_bad_log_query_is_a_400_with_brevos_codes(base: str, params: dict[str, str], code: str) -> None:
    assert_error(email_log(base, **params), 400, code)


def test_the_log_needs_the_api_key(base: str) -> None:
    answer = requests.get(f"{base}/v3/smtp/emails", params={"email": "a@b.co"}, timeout=5)

    assert_error(answer, 401, "unauthorized")


def test_a_fault_on_the_log_matches_its_query(base: str) -> None:
    # Three log reads in a row pass Brevo's 2/s on the log; this test is about the fault.
    requests.put(f"{base}/_sandbox/limits", json={"limits": {"smtp_other": "off"}}, timeout=5)
    add_fault(base, path="/v3/smtp/emails", status=500, match="fail-me@example.com")

    assert email_log(base, email="other@example.com").status_code == 200
    assert email_log(base, email="fail-me@example.com").status_code == 500
    assert email_log(base, email="fail-me@example.com").status_code == 200


def test_forgetting_idempotency_keys_lets_the_same_key_send_again(base: str) -> None:
    payload = email_payload(headers={"idempotencyKey": str(uuid.uuid4())})
    assert post_email(base, payload).status_code == 201
    assert post_email(base, payload).status_code == 400

    assert requests.delete(f"{base}/_sandbox/idempotency-keys", timeout=5).status_code == 204

    assert post_email(base, payload).status_code == 201
    assert len(get_json(base, "/_sandbox/emails")) == 2


def test_a_malformed_request_line_is_logged_without_its_text_or_the_peer(
    base: str, sandbox_log: Path
) -> None:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET /v3/contacts/s3cr3t@example.org extra HTTP/1.1\r\n\r\n")
        answer = sock.makefile("rb").read()
    deadline = time.monotonic() + 5
    while "- - 400\n" not in sandbox_log.read_text():
        assert time.monotonic() < deadline, sandbox_log.read_text()
        time.sleep(0.05)

    assert b" 400 " in answer.split(b"\r\n", 1)[0] and b"Bad request syntax" in answer
    assert "s3cr3t" not in sandbox_log.read_text()
    assert "127.0.0.1" not in sandbox_log.read_text()


def test_a_429_fault_answers_with_brevos_rate_limit_headers(base: str) -> None:
    add_fault(base, path="/v3/contacts", status=429)
    add_fault(base, path="/v3/contacts", status=429, headers={"X-Sib-Ratelimit-Reset": "9"})

    default, custom = post_contact(base, {"email": "a@b.co"}), post_contact(base, {"email": "a@b.co"})

    assert default.status_code == custom.status_code == 429
    assert default.headers["x-sib-ratelimit-remaining"] == "0"
    assert default.headers["x-sib-ratelimit-reset"] == "1"
    assert custom.headers["x-sib-ratelimit-reset"] == "9"
    assert "Retry-After" not in default.headers


@pytest.mark.parametrize(
    "headers",
    [
        ["x"],
        {"bad name": "1"},
        {"x-ok": 5},
        {"x-ok": "a\r\nSet-Cookie: y"},
        {"x-ok": "\u20ac"},
        {"Content-Length": "0"},
        {"connection": "close"},
    ],
    ids=str,
)
def test_fault_headers_must_be_names_mapped_to_single_line_strings(base: str, headers: Any) -> None:
    answer = add_fault(base, path="/v3/contacts", status=500, headers=headers)

    assert_error(answer, 400, "invalid_parameter")


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}],
    ids=["foreign-origin", "null-origin", "cross-site"],
)
def test_a_page_on_another_site_cannot_reset_the_sandbox_or_inject_faults(
    base: str, headers: dict[str, str]
) -> None:
    assert post_email(base, email_payload()).status_code == 201

    reset = requests.post(f"{base}/_sandbox/reset", headers=headers, timeout=5)
    fault = requests.post(
        f"{base}/_sandbox/faults", json={"path": "/v3/smtp/email"}, headers=headers, timeout=5
    )

    assert_error(reset, 403, "forbidden_origin")
    assert_error(fault, 403, "forbidden_origin")
    assert get_json(base, "/_sandbox/faults") == []
    assert get_json(base, "/_sandbox/stats")["emails_accepted"] >= 1


def test_the_sandbox_page_itself_and_local_tools_may_still_reset_it(base: str) -> None:
    for headers in ({"Origin": "http://localhost:8025"}, {"Sec-Fetch-Site": "same-origin"}, {}):
        assert requests.post(f"{base}/_sandbox/reset", headers=headers, timeout=5).status_code == 204
