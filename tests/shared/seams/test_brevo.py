"""shared.seams.brevo: the Brevo client against the session's Brevo sandbox, with injected faults.

Every test uses its own address and matches its faults on it, so faults never hit other tests.
The sandbox holds Brevo's general tier, as production would hold the store to it.
"""

from __future__ import annotations

import time
import uuid

import pytest
import requests

from shared.config.errors import UpstreamError, UpstreamUnavailable
from shared.seams.brevo import (
    CONTACT_CREATED,
    CONTACT_UNCHANGED,
    LOG_PAGE,
    LOG_PAGES,
    QUOTA_RETRY_AFTER_SECONDS,
    BrevoClient,
    Email,
    Pace,
)

API_KEY = "unit-test-key"
# The most contact calls one test here makes against the sandbox.
CONTACT_CALLS_PER_TEST = 4


def wait_for_room(sandbox, family: str, calls: int) -> None:
    """Wait until the sandbox's window for `family` has room for `calls` more. The general tier
    allows 10 contact calls and 2 log reads a second across the whole sandbox, and these tests
    follow each other faster than that: paced, they stay inside the limits the store lives with."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        view = requests.get(f"{sandbox.url}/_sandbox/limits", timeout=5).json()["families"][family]
        if view["remaining"] is None or view["remaining"] >= calls:
            return
        time.sleep(0.05)
    raise AssertionError(f"the sandbox's {family} window had no room for {calls} calls within 5 s")


@pytest.fixture(autouse=True)
def room_in_the_rate_limits(request):
    """A test that talks to the sandbox starts with room in the windows it uses."""
    if "sandbox" in request.fixturenames:
        sandbox = request.getfixturevalue("sandbox")
        wait_for_room(sandbox, "contacts", CONTACT_CALLS_PER_TEST)
        wait_for_room(sandbox, "smtp_other", 1)


@pytest.fixture
def address() -> str:
    return f"brevo.{uuid.uuid4().hex[:12]}@example.org"


@pytest.fixture
def client(sandbox) -> BrevoClient:
    session = requests.Session()
    yield BrevoClient(session, f"{sandbox.url}/v3/", API_KEY, timeout=5)
    session.close()


def fault(
    sandbox, path: str, match: str, status: int = 0, delay: float = 0, body: dict | None = None
) -> None:
    spec = {"path": path, "status": status, "match": match, "times": 1, "delay_seconds": delay}
    if body is not None:
        spec["body"] = body
    requests.post(f"{sandbox.url}/_sandbox/faults", json=spec, timeout=5).raise_for_status()


def emails_to(sandbox, address: str) -> list[dict]:
    return requests.get(f"{sandbox.url}/_sandbox/emails", params={"to": address}, timeout=5).json()


def contacts(sandbox, address: str) -> list[dict]:
    return requests.get(f"{sandbox.url}/_sandbox/contacts", params={"email": address}, timeout=5).json()


def email_to(address: str, name: str = "Ada") -> Email:
    return Email(
        sender_email="store@example.com",
        sender_name="Storefront",
        to_email=address,
        to_name=name,
        subject="Your Agent Starter Kit is ready",
        html='<p>Hello Ada,</p><p><a href="https://store.example.net/api/download/t0k">Download</a></p>',
        text="Hello Ada,\n\nhttps://store.example.net/api/download/t0k\n",
        tags=("storefront", "agent-starter-kit"),
    )


# --- contacts --------------------------------------------------------------------------------------


def owner_adds_contact(sandbox, address: str, attributes: dict, list_ids: list[int]) -> None:
    """The store owner's own contact, made in Brevo before any purchase."""
    body = {"email": address, "attributes": attributes, "listIds": list_ids}
    response = requests.post(f"{sandbox.url}/v3/contacts", json=body, headers={"api-key": API_KEY}, timeout=5)
    assert response.status_code == 201


def test_a_new_buyer_becomes_a_contact_with_the_name_given(client, sandbox, address):
    assert client.upsert_contact(address, "Ada") == CONTACT_CREATED == "created"

    [contact] = contacts(sandbox, address)
    assert contact["attributes"] == {"FIRSTNAME": "Ada"}


def test_a_strangers_purchase_leaves_an_existing_contacts_first_name_unchanged(client, sandbox, address):
    owner_adds_contact(sandbox, address, {"FIRSTNAME": "Ada", "LASTNAME": "Lovelace"}, [7])
    [before] = contacts(sandbox, address)

    outcome = client.upsert_contact(address, "ACTION NEEDED re-verify your account")

    assert outcome == CONTACT_UNCHANGED
    assert f"contact {outcome} in Brevo" == "contact left unchanged in Brevo"
    [after] = contacts(sandbox, address)
    assert after["attributes"] == {"FIRSTNAME": "Ada", "LASTNAME": "Lovelace"}
    assert after == before


def test_a_second_purchase_does_not_rename_the_contact_the_first_one_created(client, sandbox, address):
    assert client.upsert_contact(address, "Ada") == CONTACT_CREATED
    assert client.upsert_contact(address, "Mallory") == CONTACT_UNCHANGED
    assert client.upsert_contact(address, "") == CONTACT_UNCHANGED

    [contact] = contacts(sandbox, address)
    assert contact["attributes"] == {"FIRSTNAME": "Ada"}
    assert contact["upserts"] == 1


def test_upsert_without_a_name_sends_no_attributes(client, sandbox, address):
    assert client.upsert_contact(address, "") == "created"

    [contact] = contacts(sandbox, address)
    assert contact["attributes"] == {}


# --- transactional email ---------------------------------------------------------------------------


def test_email_returns_the_message_id_and_is_captured_with_the_exact_fields(client, sandbox, address):
    email = email_to(address)

    message_id = client.send_email(email)

    [captured] = emails_to(sandbox, address)
    assert message_id == captured["messageId"]
    assert message_id.startswith("<") and message_id.endswith(">")
    assert captured["sender"] == {"email": "store@example.com", "name": "Storefront"}
    assert captured["to"] == [{"email": address, "name": "Ada"}]
    assert captured["subject"] == email.subject
    assert captured["htmlContent"] == email.html
    assert captured["textContent"] == email.text
    assert captured["tags"] == ["storefront", "agent-starter-kit"]
    assert captured["templateId"] is None
    assert captured["params"] == {}
    assert captured["headers"] == {}
    assert captured["links"] == ["https://store.example.net/api/download/t0k"]


def test_email_without_a_recipient_name_sends_only_the_address(client, sandbox, address):
    client.send_email(email_to(address, name=""))

    [captured] = emails_to(sandbox, address)
    assert captured["to"] == [{"email": address}]


def test_each_email_gets_its_own_message_id(client, sandbox, address):
    first = client.send_email(email_to(address))
    second = client.send_email(email_to(address))

    assert first != second
    assert len(emails_to(sandbox, address)) == 2


# --- the idempotency key ---------------------------------------------------------------------------


def test_an_idempotency_key_is_sent_as_the_idempotency_key_header_of_the_email(client, sandbox, address):
    key = str(uuid.uuid4())

    message_id = client.send_email(email_to(address), key)

    [captured] = emails_to(sandbox, address)
    assert message_id == captured["messageId"]
    assert captured["headers"] == {"idempotencyKey": key}


def test_a_repeat_with_the_same_key_returns_none_and_sends_nothing_more(client, sandbox, address):
    key = str(uuid.uuid4())
    first = client.send_email(email_to(address), key)

    repeat = client.send_email(email_to(address), key)

    assert first is not None
    assert repeat is None
    assert [e["messageId"] for e in emails_to(sandbox, address)] == [first]


def test_different_keys_send_different_emails(client, sandbox, address):
    first = client.send_email(email_to(address), str(uuid.uuid4()))
    second = client.send_email(email_to(address), str(uuid.uuid4()))

    assert first is not None and second is not None and first != second
    assert len(emails_to(sandbox, address)) == 2


def test_without_a_key_a_duplicate_parameter_refusal_still_raises(client, sandbox, address):
    body = {
        "code": "duplicate_parameter",
        "message": "An email with this idempotencyKey was already accepted",
    }
    fault(sandbox, "/v3/smtp/email", address, status=400, body=body)

    with pytest.raises(UpstreamError) as caught:
        client.send_email(email_to(address))

    assert type(caught.value) is UpstreamError
    assert caught.value.upstream_code == "duplicate_parameter"
    assert emails_to(sandbox, address) == []


def test_with_a_key_a_duplicate_parameter_refusal_means_already_sent(client, sandbox, address):
    body = {
        "code": "duplicate_parameter",
        "message": "An email with this idempotencyKey was already accepted",
    }
    fault(sandbox, "/v3/smtp/email", address, status=400, body=body)

    assert client.send_email(email_to(address), str(uuid.uuid4())) is None


def test_with_a_key_other_refusals_still_raise(client, sandbox, address):
    fault(sandbox, "/v3/smtp/email", address, status=400, body={"code": "invalid_parameter", "message": "x"})

    with pytest.raises(UpstreamError) as caught:
        client.send_email(email_to(address), str(uuid.uuid4()))

    assert type(caught.value) is UpstreamError
    assert caught.value.upstream_code == "invalid_parameter"


def test_with_a_key_server_errors_are_still_upstream_unavailable(client, sandbox, address):
    fault(sandbox, "/v3/smtp/email", address, status=503)

    with pytest.raises(UpstreamUnavailable):
        client.send_email(email_to(address), str(uuid.uuid4()))


def test_a_key_that_failed_with_a_server_error_can_send_on_retry(client, sandbox, address):
    key = str(uuid.uuid4())
    fault(sandbox, "/v3/smtp/email", address, status=500)
    with pytest.raises(UpstreamUnavailable):
        client.send_email(email_to(address), key)

    message_id = client.send_email(email_to(address), key)

    [captured] = emails_to(sandbox, address)
    assert message_id == captured["messageId"]


# --- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 429])
@pytest.mark.parametrize(
    ("path", "call"),
    [
        ("/v3/contacts", lambda c, a: c.upsert_contact(a, "Ada")),
        ("/v3/smtp/email", lambda c, a: c.send_email(email_to(a))),
    ],
    ids=["contact", "email"],
)
def test_server_errors_and_throttling_are_upstream_unavailable(client, sandbox, address, path, call, status):
    fault(sandbox, path, address, status=status)

    with pytest.raises(UpstreamUnavailable) as caught:
        call(client, address)

    assert caught.value.status == 503
    assert caught.value.code == "upstream_unavailable"
    assert caught.value.retry_after == (1 if status == 429 else 2)  # the sandbox's default reset is 1 s
    assert str(status) in caught.value.message
    assert emails_to(sandbox, address) == [] and contacts(sandbox, address) == []


@pytest.mark.parametrize(
    ("path", "call", "what"),
    [
        ("/v3/contacts", lambda c, a: c.upsert_contact(a, "Ada"), "contact create"),
        ("/v3/smtp/email", lambda c, a: c.send_email(email_to(a)), "fulfillment email"),
    ],
    ids=["contact", "email"],
)
def test_a_refusal_is_upstream_error_and_does_not_echo_the_address(
    client, sandbox, address, path, call, what
):
    body = {"code": "invalid_parameter", "message": f"{address} is not a valid email address"}
    fault(sandbox, path, address, status=400, body=body)

    with pytest.raises(UpstreamError) as caught:
        call(client, address)

    assert type(caught.value) is UpstreamError
    assert caught.value.status == 502
    assert caught.value.code == "upstream_rejected"
    assert caught.value.message == f"Brevo refused the {what} (400 invalid_parameter)"
    assert (caught.value.upstream_status, caught.value.not_sent) == (400, True)
    assert address not in caught.value.message
    assert address.split("@")[0] not in str(caught.value)


def test_a_real_validation_refusal_from_brevo_is_upstream_error(client, sandbox, address):
    bad = Email("store@example.com", "Storefront", "not-an-address", "", "s", "<p>h</p>", "h")

    with pytest.raises(UpstreamError) as caught:
        client.send_email(bad)

    assert type(caught.value) is UpstreamError
    assert "400 invalid_parameter" in caught.value.message


def test_a_missing_api_key_is_refused_as_upstream_error(sandbox, address):
    client = BrevoClient(requests.Session(), f"{sandbox.url}/v3", "", timeout=5)

    with pytest.raises(UpstreamError) as caught:
        client.upsert_contact(address, "Ada")

    assert type(caught.value) is UpstreamError
    assert "401 unauthorized" in caught.value.message
    assert contacts(sandbox, address) == []


def test_an_answer_slower_than_the_timeout_is_upstream_unavailable(sandbox, address):
    client = BrevoClient(requests.Session(), f"{sandbox.url}/v3", API_KEY, timeout=0.3)
    fault(sandbox, "/v3/smtp/email", address, delay=1.0)
    with pytest.raises(UpstreamUnavailable, match="in time") as caught:
        client.send_email(email_to(address))

    assert caught.value.status == 503


def test_a_slow_answer_on_a_reused_keep_alive_connection_is_also_a_timeout(sandbox, address):
    client = BrevoClient(requests.Session(), f"{sandbox.url}/v3", API_KEY, timeout=0.3)
    client.upsert_contact(address, "Ada")  # opens the connection the next call reuses
    fault(sandbox, "/v3/smtp/email", address, delay=1.0)

    with pytest.raises(UpstreamUnavailable, match="in time"):
        client.send_email(email_to(address))


def test_an_unreachable_base_url_is_upstream_unavailable(address):
    client = BrevoClient(requests.Session(), "http://127.0.0.1:9/v3", API_KEY, timeout=2)

    with pytest.raises(UpstreamUnavailable, match="could not be reached") as caught:
        client.upsert_contact(address, "Ada")

    assert caught.value.status == 503


class _Answer:
    def __init__(self, status: int, payload: object, headers: dict | None = None):
        self.status_code = status
        self._payload = payload
        self.headers = headers or {}

    def json(self):
        if isinstance(self._payload, Exception):
            raise self._payload
        return self._payload


class _Session:
    """Answers every request with the next canned response (the last one repeats) and remembers
    the request."""

    def __init__(self, *answers: _Answer):
        self.answers = list(answers)
        self.calls: list[dict] = []

    def request(self, method, url, **kwargs):
        self.calls.append({"method": method, "url": url, **kwargs})
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.mark.parametrize(
    "payload", [{}, ValueError("not json"), ["messageId"], None], ids=["no-key", "not-json", "list", "null"]
)
def test_accepted_email_without_a_message_id_is_upstream_error(payload):
    client = BrevoClient(_Session(_Answer(201, payload)), "https://api.example", API_KEY, timeout=5)

    with pytest.raises(UpstreamError, match="no messageId") as caught:
        client.send_email(email_to("a@example.org"))

    assert type(caught.value) is UpstreamError


def test_requests_carry_the_api_key_json_accept_header_and_timeout():
    session = _Session(_Answer(201, {"messageId": "<m@x>"}))
    client = BrevoClient(session, "https://api.example/v3/", "the-key", timeout=7.5)

    client.upsert_contact("a@example.org", "Ada")
    client.send_email(email_to("a@example.org"))

    assert [c["url"] for c in session.calls] == [
        "https://api.example/v3/contacts",
        "https://api.example/v3/smtp/email",
    ]
    for call in session.calls:
        assert call["headers"] == {"api-key": "the-key", "accept": "application/json"}
        assert call["timeout"] == 7.5
    assert session.calls[0]["json"] == {"email": "a@example.org", "attributes": {"FIRSTNAME": "Ada"}}


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_every_success_status_is_a_created_contact(status):
    client = BrevoClient(_Session(_Answer(status, None)), "https://api.example", API_KEY, timeout=5)

    assert client.upsert_contact("a@example.org", "") == CONTACT_CREATED


@pytest.mark.parametrize(
    "payload",
    [
        {
            "code": "duplicate_parameter",
            "message": "Unable to create contact, email is already associated with another Contact",
            "metadata": {"duplicate_identifiers": ["email"]},
        },
        {"code": "duplicate_parameter", "message": "Contact already exist"},
    ],
    ids=["current", "older"],
)
def test_brevos_duplicate_answer_means_the_contact_exists_and_was_left_unchanged(payload):
    session = _Session(_Answer(400, payload))
    client = BrevoClient(session, "https://api.example", API_KEY, timeout=5)

    assert client.upsert_contact("a@example.org", "Mallory") == CONTACT_UNCHANGED
    assert len(session.calls) == 1


@pytest.mark.parametrize("code", ["invalid_parameter", "missing_parameter", "error"])
def test_other_refusals_of_the_contact_are_still_upstream_errors(code):
    client = BrevoClient(_Session(_Answer(400, {"code": code})), "https://api.example", API_KEY, timeout=5)

    with pytest.raises(UpstreamError, match=f"400 {code}"):
        client.upsert_contact("a@example.org", "Ada")


@pytest.mark.parametrize("payload", [ValueError("html"), ["x"], "text"], ids=["not-json", "list", "string"])
def test_an_unreadable_error_body_gives_code_error(payload):
    client = BrevoClient(_Session(_Answer(403, payload)), "https://api.example", API_KEY, timeout=5)

    with pytest.raises(UpstreamError, match=r"\(403 error\)"):
        client.upsert_contact("a@example.org", "")


def test_the_key_goes_in_the_body_headers_and_not_in_the_http_headers():
    session = _Session(_Answer(201, {"messageId": "<m@x>"}))
    client = BrevoClient(session, "https://api.example/v3", "the-key", timeout=5)
    key = str(uuid.uuid4())

    client.send_email(email_to("a@example.org"))
    client.send_email(email_to("a@example.org"), key)

    without, with_key = (call["json"] for call in session.calls)
    assert "headers" not in without
    assert with_key["headers"] == {"idempotencyKey": key}
    assert {k: v for k, v in with_key.items() if k != "headers"} == without
    assert all(
        call["headers"] == {"api-key": "the-key", "accept": "application/json"} for call in session.calls
    )


# --- the transactional log (find_sent) -------------------------------------------------------------


def tagged(address: str, tag: str) -> Email:
    return Email(**{**email_to(address).__dict__, "tags": ("storefront", tag)})


def test_find_sent_names_the_email_carrying_the_tag_and_nothing_else(client, sandbox, address):
    tag, other = f"purchase-{uuid.uuid4()}", f"purchase-{uuid.uuid4()}"
    client.send_email(tagged(address, other))
    message_id = client.send_email(tagged(address, tag))
    client.send_email(tagged(address, other))

    def find_sent(to: str, wanted: str) -> str | None:
        # Four log reads in a row pass the general tier's 2 a second: wait for room before each,
        # as the store's own reads are spread out, rather than lift the limit.
        wait_for_room(sandbox, "smtp_other", 1)
        return client.find_sent(to, wanted)

    assert find_sent(address, tag) == message_id
    assert find_sent(address.upper(), tag) == message_id
    assert find_sent(address, f"purchase-{uuid.uuid4()}") is None
    assert find_sent(f"other.{address}", tag) is None


def test_find_sent_asks_for_the_address_newest_first():
    session = _Session(_Answer(200, {"count": 0, "transactionalEmails": []}))
    client = BrevoClient(session, "https://api.example/v3", "the-key", timeout=5)

    assert client.find_sent("a@example.org", "t") is None

    [call] = session.calls
    assert (call["method"], call["url"]) == ("GET", "https://api.example/v3/smtp/emails")
    assert call["params"] == {"email": "a@example.org", "sort": "desc", "limit": LOG_PAGE, "offset": 0}
    assert call["headers"] == {"api-key": "the-key", "accept": "application/json"}


def test_find_sent_turns_the_pages_until_a_short_one():
    filler = [{"messageId": f"<{n}@x>", "tags": ["storefront"]} for n in range(LOG_PAGE)]
    wanted = {"messageId": "<wanted@x>", "tags": ["storefront", "purchase-1"]}
    session = _Session(
        _Answer(200, {"transactionalEmails": filler}),
        _Answer(200, {"transactionalEmails": [wanted]}),
    )
    client = BrevoClient(session, "https://api.example/v3", API_KEY, timeout=5)

    assert client.find_sent("a@example.org", "purchase-1") == "<wanted@x>"
    assert [c["params"]["offset"] for c in session.calls] == [0, LOG_PAGE]


def test_find_sent_gives_up_rather_than_say_no_after_its_last_page():
    filler = [{"messageId": f"<{n}@x>", "tags": ["storefront"]} for n in range(LOG_PAGE)]
    session = _Session(_Answer(200, {"transactionalEmails": filler}))
    client = BrevoClient(session, "https://api.example/v3", API_KEY, timeout=5)

    with pytest.raises(UpstreamError, match="too many emails") as caught:
        client.find_sent("a@example.org", "purchase-1")
    assert type(caught.value) is UpstreamError  # lasting: not worth a quick retry
    assert len(session.calls) == LOG_PAGES


def test_a_404_that_is_not_brevos_not_found_is_not_read_as_an_empty_log():
    answer = _Answer(404, ValueError("an HTML page from a gateway"))
    client = BrevoClient(_Session(answer), "https://api.example/v3", API_KEY, timeout=5)

    with pytest.raises(UpstreamUnavailable, match="404"):
        client.find_sent("a@example.org", "purchase-1")


@pytest.mark.parametrize(
    ("status", "payload"),
    [(404, {"code": "document_not_found", "message": "not found"}), (200, {}), (200, {"count": 0})],
    ids=["404", "empty-object", "no-list"],
)
def test_find_sent_reads_an_empty_log_as_none(status, payload):
    client = BrevoClient(_Session(_Answer(status, payload)), "https://api.example/v3", API_KEY, timeout=5)

    assert client.find_sent("a@example.org", "purchase-1") is None


@pytest.mark.parametrize(
    "payload",
    [ValueError("html"), ["x"], {"transactionalEmails": "purchase-1"}],
    ids=["not-json", "list", "entries-not-a-list"],
)
def test_find_sent_refuses_an_unreadable_log(payload):
    client = BrevoClient(_Session(_Answer(200, payload)), "https://api.example/v3", API_KEY, timeout=5)

    with pytest.raises(UpstreamError):
        client.find_sent("a@example.org", "purchase-1")


def test_find_sent_matches_whole_tags_only():
    entry = {"messageId": "<m@x>", "tags": "storefront purchase-1"}
    client = BrevoClient(
        _Session(_Answer(200, {"transactionalEmails": [entry]})), "https://api.example/v3", API_KEY, timeout=5
    )

    assert client.find_sent("a@example.org", "purchase-1") is None


@pytest.mark.parametrize(("status", "error"), [(500, UpstreamUnavailable), (400, UpstreamError)])
def test_find_sent_failures_are_domain_errors(client, sandbox, address, status, error):
    fault(sandbox, "/v3/smtp/emails", address, status=status)

    with pytest.raises(error, match="email log lookup") as caught:
        client.find_sent(address, "purchase-1")

    assert address not in str(caught.value)


# --- when to retry ---------------------------------------------------------------------------------


def test_a_429_carries_brevos_rate_limit_reset_as_retry_after(client, sandbox, address):
    spec = {
        "path": "/v3/smtp/email",
        "status": 429,
        "match": address,
        "headers": {"x-sib-ratelimit-reset": "16.2"},
    }
    requests.post(f"{sandbox.url}/_sandbox/faults", json=spec, timeout=5).raise_for_status()

    with pytest.raises(UpstreamUnavailable) as caught:
        client.send_email(email_to(address))

    assert caught.value.retry_after == 17
    assert (caught.value.upstream_status, caught.value.not_sent) == (429, True)  # a 429 sends nothing
    assert caught.value.pace == Pace(remaining=0, reset=16.2)
    assert emails_to(sandbox, address) == []


@pytest.mark.parametrize(
    ("reset", "retry_after"),
    [(None, 2), ("soon", 2), ("nan", 2), ("inf", 2), ("-5", 2), ("0", 1), ("86400", 3600)],
)
def test_an_odd_rate_limit_reset_still_gives_a_sane_retry_after(reset, retry_after):
    headers = {} if reset is None else {"x-sib-ratelimit-reset": reset}
    session = _Session(_Answer(429, {"code": "too_many_requests"}, headers))
    client = BrevoClient(session, "https://api.example/v3", API_KEY, timeout=5)

    with pytest.raises(UpstreamUnavailable) as caught:
        client.upsert_contact("a@example.org", "")

    assert caught.value.retry_after == retry_after


def test_a_timeout_asks_for_a_short_pause(sandbox, address):
    client = BrevoClient(requests.Session(), f"{sandbox.url}/v3", API_KEY, timeout=0.3)
    fault(sandbox, "/v3/smtp/email", address, delay=1.0)

    with pytest.raises(UpstreamUnavailable) as caught:
        client.send_email(email_to(address))

    assert caught.value.retry_after == 2


# --- what a failed call tells the purchase: the quota, and whether anything went out ---------------


def test_a_402_from_the_email_send_is_a_503_to_retry_in_an_hour_and_nothing_was_sent(
    client, sandbox, address
):
    body = {"code": "not_enough_credits", "message": f"Not enough credits to send to {address}"}
    fault(sandbox, "/v3/smtp/email", address, status=402, body=body)

    with pytest.raises(UpstreamUnavailable) as caught:
        client.send_email(email_to(address), str(uuid.uuid4()))

    assert (caught.value.status, caught.value.code) == (503, "upstream_unavailable")
    assert caught.value.retry_after == QUOTA_RETRY_AFTER_SECONDS == 3600
    assert (caught.value.upstream_status, caught.value.upstream_code) == (402, "not_enough_credits")
    assert caught.value.not_sent is True
    assert "sending quota" in caught.value.message
    assert address.split("@")[0] not in str(caught.value)
    assert emails_to(sandbox, address) == []


@pytest.mark.parametrize("status", [500, 503])
def test_a_server_error_may_have_sent_the_email_so_it_is_not_marked_not_sent(
    client, sandbox, address, status
):
    fault(sandbox, "/v3/smtp/email", address, status=status)

    with pytest.raises(UpstreamUnavailable) as caught:
        client.send_email(email_to(address), str(uuid.uuid4()))

    assert (caught.value.upstream_status, caught.value.not_sent) == (status, False)


def test_a_timeout_may_have_sent_the_email_so_it_is_not_marked_not_sent(sandbox, address):
    client = BrevoClient(requests.Session(), f"{sandbox.url}/v3", API_KEY, timeout=0.3)
    fault(sandbox, "/v3/smtp/email", address, delay=1.0)

    with pytest.raises(UpstreamUnavailable) as caught:
        client.send_email(email_to(address), str(uuid.uuid4()))

    assert (caught.value.upstream_status, caught.value.not_sent) == (0, False)


# --- contacts for the drainer: one create, or one import per batch, with Brevo's pace ---------------


def test_create_contact_returns_the_pace_brevos_headers_give(client, sandbox, address):
    outcome, pace = client.create_contact(address, "Ada")
    again, pace_again = client.create_contact(address, "Mallory")

    assert (outcome, again) == (CONTACT_CREATED, CONTACT_UNCHANGED)
    for reported in (pace, pace_again):
        assert isinstance(reported.remaining, int) and 0 <= reported.remaining < 10  # general tier
        assert reported.reset is not None and reported.reset >= 1


def test_import_contacts_sends_one_batch_into_the_list_leaving_existing_contacts_alone():
    answer = _Answer(202, {"processId": 78}, {"x-sib-ratelimit-remaining": "7", "x-sib-ratelimit-reset": "1"})
    session = _Session(answer)
    client = BrevoClient(session, "https://api.example/v3", "the-key", timeout=5)

    pace = client.import_contacts([("a@example.org", "Ada"), ("b@example.org", "")], 12)

    assert pace == Pace(remaining=7, reset=1.0)
    [call] = session.calls
    assert (call["method"], call["url"]) == ("POST", "https://api.example/v3/contacts/import")
    assert call["headers"] == {"api-key": "the-key", "accept": "application/json"}
    assert call["json"]["jsonBody"] == [
        {"email": "a@example.org", "attributes": {"FIRSTNAME": "Ada"}},
        {"email": "b@example.org", "attributes": {}},
    ]
    assert call["json"]["listIds"] == [12]
    assert call["json"]["updateExistingContacts"] is False


def test_an_import_creates_the_new_contacts_in_the_list_and_changes_no_existing_one(client, sandbox, address):
    owner_adds_contact(sandbox, address, {"FIRSTNAME": "Ada", "LASTNAME": "Lovelace"}, [7])
    [before] = contacts(sandbox, address)
    newcomer = f"new.{address}"

    pace = client.import_contacts([(address, "Mallory"), (newcomer, "Grace")], 12)

    assert contacts(sandbox, address) == [before]
    [created] = contacts(sandbox, newcomer)
    assert (created["attributes"], created["listIds"]) == ({"FIRSTNAME": "Grace"}, [12])
    assert isinstance(pace.remaining, int) and pace.reset is not None


def test_a_refused_import_is_an_upstream_error_naming_the_import_and_nothing_sent(client, sandbox, address):
    fault(sandbox, "/v3/contacts/import", address, status=400, body={"code": "invalid_parameter"})

    with pytest.raises(UpstreamError) as caught:
        client.import_contacts([(address, "Ada")], 12)

    assert type(caught.value) is UpstreamError
    assert caught.value.message == "Brevo refused the contact import (400 invalid_parameter)"
    assert (caught.value.upstream_status, caught.value.not_sent) == (400, True)
    assert contacts(sandbox, address) == []
