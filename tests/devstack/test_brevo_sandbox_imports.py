"""The Brevo sandbox's contact import (``POST /v3/contacts/import``), its process, and the
bookkeeping that proves whether a contact was changed, over real HTTP.

The sandbox runs in-process with the contacts family unlimited: these tests are about what an
import does, and ``test_brevo_sandbox_limits`` about how often one may be made.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from devstack.brevo_sandbox.server import make_server

pytestmark = pytest.mark.services  # starts processes or servers of its own

API_KEY = {"api-key": "test-key"}


@pytest.fixture(scope="module")
def sandbox_url() -> Iterator[str]:
    server = make_server("127.0.0.1", 0, limits={"contacts": "off"})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://{}:{}".format(*server.server_address[:2])
    server.shutdown()
    server.server_close()


@pytest.fixture
def base(sandbox_url: str) -> str:
    requests.post(f"{sandbox_url}/_sandbox/reset", timeout=5).raise_for_status()
    return sandbox_url


def unique(name: str) -> str:
    return f"{name}.{uuid.uuid4().hex[:8]}@example.com"


def import_contacts(base: str, body: Any, timeout: float = 10) -> requests.Response:
    return requests.post(f"{base}/v3/contacts/import", json=body, headers=API_KEY, timeout=timeout)


def create_contact(base: str, **body: Any) -> requests.Response:
    return requests.post(f"{base}/v3/contacts", json=body, headers=API_KEY, timeout=5)


def contact(base: str, email: str) -> dict[str, Any]:
    [found] = requests.get(f"{base}/_sandbox/contacts", params={"email": email}, timeout=5).json()
    return found


def contacts(base: str) -> list[dict[str, Any]]:
    return requests.get(f"{base}/_sandbox/contacts", timeout=5).json()


def reports(base: str) -> list[dict[str, Any]]:
    return requests.get(f"{base}/_sandbox/imports", timeout=5).json()


def assert_error(answer: requests.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["code"] == code and answer.json()["message"]


def test_an_import_creates_contacts_just_as_create_contact_does(base: str) -> None:
    made = unique("made")
    create_contact(base, email=made, attributes={"FIRSTNAME": "Made"}, listIds=[4])
    ann, bob = unique("Ann"), unique("bob")
    body = {
        "jsonBody": [{"email": ann, "attributes": {"FIRSTNAME": "Ann", "EMPTY": ""}}, {"email": bob}],
        "listIds": [4, 7],
        "notifyUrl": "https://example.com/hook",
        "disableNotification": True,
    }

    answer = import_contacts(base, body)

    assert answer.status_code == 202
    process_id = answer.json()["processId"]
    assert answer.json() == {"processId": process_id} and isinstance(process_id, int)
    imported = contact(base, ann)
    assert set(imported) == set(contact(base, made))
    assert imported["email"] == ann.lower()
    assert imported["attributes"] == {"FIRSTNAME": "Ann"}, "an empty value sets nothing"
    assert imported["listIds"] == [4, 7] and contact(base, bob)["listIds"] == [4, 7]
    assert (imported["upserts"], imported["modifications"]) == (1, 0)
    assert imported["created_at"] == imported["updated_at"]
    assert [r["created"] for r in reports(base)] == [2]
    stats = requests.get(f"{base}/_sandbox/stats", timeout=5).json()
    assert (stats["imports"], stats["contacts_imported"], stats["requests"]["/v3/contacts/import"]) == (
        1,
        2,
        1,
    )
    duplicate = create_contact(base, email=bob)
    assert_error(duplicate, 400, "duplicate_parameter")


def test_the_process_of_an_import_is_complete_when_the_import_answers(base: str) -> None:
    process_id = import_contacts(base, {"jsonBody": [{"email": unique("p")}], "listIds": [1]}).json()[
        "processId"
    ]

    answer = requests.get(f"{base}/v3/processes/{process_id}", headers=API_KEY, timeout=5)
    unknown = requests.get(f"{base}/v3/processes/{process_id + 1}", headers=API_KEY, timeout=5)

    assert answer.status_code == 200
    assert answer.json() == {"id": process_id, "name": "IMPORTUSER", "status": "completed"}
    assert answer.headers["x-sib-ratelimit-limit"] == "100", "processes count in the other family"
    assert_error(unknown, 404, "document_not_found")


def test_with_update_existing_contacts_false_an_existing_contact_is_left_entirely_alone(base: str) -> None:
    ann, new = unique("ann"), unique("new")
    create_contact(base, email=ann, attributes={"FIRSTNAME": "Ann", "CITY": "Paris"}, listIds=[2])
    before = contact(base, ann)
    body = {
        "jsonBody": [
            {"email": ann.upper(), "attributes": {"FIRSTNAME": "Mallory", "CITY": ""}},
            {"email": new},
        ],
        "listIds": [9],
        "updateExistingContacts": False,
        "emptyContactsAttributes": True,
    }

    answer = import_contacts(base, body)

    assert answer.status_code == 202
    assert contact(base, ann) == before
    assert before["modifications"] == 0 and before["updated_at"] == before["created_at"]
    assert contact(base, new)["listIds"] == [9]
    [report] = reports(base)
    assert (report["created"], report["updated"], report["unchanged"]) == (1, 0, 1)


def test_by_default_an_import_updates_an_existing_contact_and_counts_the_change(base: str) -> None:
    ann = unique("ann")
    create_contact(
        base, email=ann, attributes={"FIRSTNAME": "Ann", "CITY": "Paris", "ZIP": "75001"}, listIds=[2]
    )
    before = contact(base, ann)
    body = {"jsonBody": [{"email": ann, "attributes": {"FIRSTNAME": "Anne", "CITY": ""}}], "listIds": [9, 2]}

    assert import_contacts(base, body).status_code == 202

    after = contact(base, ann)
    assert after["id"] == before["id"] and after["created_at"] == before["created_at"]
    assert after["attributes"] == {"FIRSTNAME": "Anne", "CITY": "Paris", "ZIP": "75001"}, "empty leaves CITY"
    assert after["listIds"] == [2, 9]
    assert (after["upserts"], after["modifications"]) == (2, 1)
    assert reports(base)[0]["updated"] == 1


def test_empty_contacts_attributes_erases_what_the_import_leaves_empty(base: str) -> None:
    ann = unique("ann")
    create_contact(base, email=ann, attributes={"FIRSTNAME": "Ann", "CITY": "Paris"})
    body = {
        "jsonBody": [{"email": ann, "attributes": {"CITY": "", "ZIP": None}}],
        "listIds": [1],
        "emptyContactsAttributes": True,
    }

    assert import_contacts(base, body).status_code == 202

    assert contact(base, ann)["attributes"] == {"FIRSTNAME": "Ann"}


def test_modifications_count_updates_through_every_endpoint(base: str) -> None:
    ann = unique("ann")
    import_contacts(base, {"jsonBody": [{"email": ann}], "listIds": [1]})
    create_contact(base, email=ann, attributes={"A": 1}, updateEnabled=True)
    import_contacts(base, {"jsonBody": [{"email": ann, "attributes": {"B": 2}}], "listIds": [1]})
    create_contact(base, email=ann, attributes={"C": 3})  # refused as a duplicate: no change

    found = contact(base, ann)
    assert (found["upserts"], found["modifications"]) == (3, 2)
    assert found["attributes"] == {"A": 1, "B": 2}


@pytest.mark.parametrize("list_ids", [None, []], ids=["absent", "empty"])
def test_list_ids_are_required_unless_a_new_list_is_asked_for(base: str, list_ids: Any) -> None:
    body: dict[str, Any] = {"jsonBody": [{"email": unique("x")}]}
    if list_ids is not None:
        body["listIds"] = list_ids

    assert_error(import_contacts(base, body), 400, "missing_parameter")
    assert contacts(base) == [] and reports(base) == []


def test_a_new_list_takes_the_imported_contacts(base: str) -> None:
    create_contact(base, email=unique("old"), listIds=[41])
    ann = unique("ann")

    answer = import_contacts(base, {"jsonBody": [{"email": ann}], "newList": {"listName": "Buyers"}})

    assert answer.status_code == 202
    [new_list] = contact(base, ann)["listIds"]
    assert new_list > 41 and reports(base)[0]["listIds"] == [new_list]


def test_invalid_emails_are_skipped_and_reported_not_refused(base: str) -> None:
    good, again = unique("good"), unique("again")
    body = {
        "jsonBody": [
            {"email": "not-an-email", "attributes": {"A": 1}},
            {"email": good},
            "just text",
            {"email": again, "attributes": "not an object"},
            {"email": good.upper()},
            {"attributes": {"A": 1}},
        ],
        "listIds": [3],
    }

    answer = import_contacts(base, body)

    assert answer.status_code == 202
    assert [c["email"] for c in contacts(base)] == [good.lower()]
    [report] = reports(base)
    assert (report["created"], report["invalid"], report["duplicates"]) == (1, 4, 1)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"listIds": [1]}, 400, "missing_parameter"),
        ({"jsonBody": [], "listIds": [1]}, 400, "invalid_parameter"),
        ({"jsonBody": {"email": "a@b.co"}, "listIds": [1]}, 400, "invalid_parameter"),
        ({"jsonBody": [{"email": "nope"}], "listIds": [1]}, 400, "invalid_parameter"),
        ({"jsonBody": [{"email": "a@b.co"}], "listIds": ["1"]}, 400, "invalid_parameter"),
        ({"jsonBody": [{"email": "a@b.co"}], "listIds": [0]}, 400, "invalid_parameter"),
        ({"jsonBody": [{"email": "a@b.co"}], "listIds": 1}, 400, "invalid_parameter"),
        ({"jsonBody": [{"email": "a@b.co"}], "newList": {"listName": " "}}, 400, "invalid_parameter"),
        (
            {"jsonBody": [{"email": "a@b.co"}], "listIds": [1], "updateExistingContacts": "no"},
            400,
            "invalid_parameter",
        ),
        (
            {"jsonBody": [{"email": "a@b.co"}], "listIds": [1], "disableNotification": 1},
            400,
            "invalid_parameter",
        ),
        ({"fileBody": "EMAIL\na@b.co", "listIds": [1]}, 400, "invalid_parameter"),
        ({"fileUrl": "https://example.com/c.csv", "listIds": [1]}, 400, "invalid_parameter"),
    ],
    ids=[
        "no-json-body",
        "empty",
        "not-a-list",
        "no-valid-email",
        "list-id-text",
        "list-id-zero",
        "list-ids-not-list",
        "new-list-unnamed",
        "flag-not-bool",
        "notification-not-bool",
        "file-body",
        "file-url",
    ],
)
def test_a_bad_import_is_refused_and_imports_nothing(base: str, body: Any, status: int, code: str) -> None:
    answer = import_contacts(base, body)

    assert_error(answer, status, code)
    assert "x-sib-ratelimit-limit" not in answer.headers, "contacts are unlimited here"
    assert contacts(base) == [] and reports(base) == []


def test_file_imports_are_refused_with_a_message_that_says_to_use_json_body(base: str) -> None:
    answer = import_contacts(base, {"fileBody": "EMAIL\na@b.co", "listIds": [1]})

    assert "jsonBody" in answer.json()["message"]


def test_a_body_over_brevos_ten_megabytes_is_refused_with_413(base: str) -> None:
    entries = [{"email": f"u{i}@example.com", "attributes": {"NOTE": "x" * 200}} for i in range(40_000)]
    body = json.dumps({"jsonBody": entries, "listIds": [1]}).encode()
    assert 10_000_000 < len(body) < 10 * 1024 * 1024  # past Brevo's 10MB, within the HTTP layer's

    answer = requests.post(
        f"{base}/v3/contacts/import",
        data=body,
        headers={**API_KEY, "Content-Type": "application/json"},
        timeout=30,
    )

    assert_error(answer, 413, "payload_too_large")
    assert answer.headers.get("x-sib-ratelimit-limit") is None, "contacts are unlimited here"
    assert contacts(base) == []


def test_a_body_the_http_layer_refuses_still_carries_the_rate_limit_headers() -> None:
    server = make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=5)
    try:
        conn.putrequest("POST", "/v3/contacts/import")
        conn.putheader("api-key", "test-key")
        conn.putheader("Content-Length", str(11 * 1024 * 1024))
        conn.endheaders()
        answer = conn.getresponse()
        body = json.loads(answer.read())
    finally:
        conn.close()
        server.shutdown()
        server.server_close()

    assert answer.status == 413 and body["code"] == "payload_too_large"
    assert answer.getheader("x-sib-ratelimit-limit") == "10"
    assert answer.getheader("x-sib-ratelimit-remaining") == "10", "a refused body does not count"


def test_a_fault_fails_an_import_and_the_retry_imports(base: str) -> None:
    ann = unique("ann")
    requests.post(
        f"{base}/_sandbox/faults",
        json={"path": "/v3/contacts/import", "status": 503, "match": ann},
        timeout=5,
    ).raise_for_status()
    body = {"jsonBody": [{"email": ann}], "listIds": [1]}

    failed, retried = import_contacts(base, body), import_contacts(base, body)

    assert failed.status_code == 503 and failed.json()["code"] == "internal_error"
    assert retried.status_code == 202
    assert [c["email"] for c in contacts(base)] == [ann]


def test_a_delayed_import_times_the_client_out_and_then_completes(base: str) -> None:
    ann = unique("ann")
    requests.post(
        f"{base}/_sandbox/faults",
        json={"path": "/v3/contacts/import", "delay_seconds": 1.5},
        timeout=5,
    ).raise_for_status()

    with pytest.raises(requests.exceptions.Timeout):
        import_contacts(base, {"jsonBody": [{"email": ann}], "listIds": [1]}, timeout=0.3)

    deadline = time.monotonic() + 10
    while not contacts(base) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [c["email"] for c in contacts(base)] == [ann]
