"""The Brevo sandbox's rate limits, their counters and the 429 storm, over real HTTP.

Each test starts its own sandbox in-process (``make_server``), with limits scaled down so one
machine can pass them; the command line gets its own subprocess tests. No assertion depends on
how fast a request is answered: a per-hour limit cannot roll over during a test, and a test that
waits for a per-second window to end waits at least as long as the window says it has left.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from devstack.brevo_sandbox.limits import parse_limit_option
from devstack.brevo_sandbox.server import make_server
from tests.devstack.test_brevo_sandbox import _start_sandbox, _stop
from tests.support import ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

API_KEY = {"api-key": "test-key"}
LIMIT_HEADERS = ("x-sib-ratelimit-limit", "x-sib-ratelimit-remaining", "x-sib-ratelimit-reset")


@pytest.fixture
def sandbox() -> Iterator[Callable[..., str]]:
    """Start a sandbox in this process with make_server's options; its base URL."""
    servers = []

    def start(**options: Any) -> str:
        server = make_server("127.0.0.1", 0, **options)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return "http://{}:{}".format(*server.server_address[:2])

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def email_payload(to: str = "customer@example.com", **extra: Any) -> dict[str, Any]:
    return {
        "sender": {"email": "shop@example.com"},
        "to": [{"email": to}],
        "subject": "Your order",
        "htmlContent": "<p>Thanks</p>",
        **extra,
    }


def send_email(base: str, payload: dict[str, Any] | None = None) -> requests.Response:
    return requests.post(f"{base}/v3/smtp/email", json=payload or email_payload(), headers=API_KEY, timeout=5)


def create_contact(base: str, email: str | None = None) -> requests.Response:
    body = {"email": email or f"c.{uuid.uuid4().hex[:10]}@example.com"}
    return requests.post(f"{base}/v3/contacts", json=body, headers=API_KEY, timeout=5)


def import_contacts(base: str) -> requests.Response:
    body = {"jsonBody": [{"email": f"i.{uuid.uuid4().hex[:10]}@example.com"}], "listIds": [3]}
    return requests.post(f"{base}/v3/contacts/import", json=body, headers=API_KEY, timeout=5)


def read_log(base: str) -> requests.Response:
    return requests.get(f"{base}/v3/smtp/emails", params={"email": "a@b.co"}, headers=API_KEY, timeout=5)


def read_process(base: str) -> requests.Response:
    return requests.get(f"{base}/v3/processes/1", headers=API_KEY, timeout=5)


def control(base: str, path: str) -> Any:
    answer = requests.get(f"{base}/_sandbox/{path}", timeout=5)
    answer.raise_for_status()
    return answer.json()


def family(base: str, name: str) -> dict[str, Any]:
    return control(base, "limits")["families"][name]


def assert_too_many_requests(answer: requests.Response, limit: str, reset_at_most: int) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.json()["code"] == "too_many_requests" and answer.json()["message"]
    assert answer.headers["x-sib-ratelimit-limit"] == limit
    assert answer.headers["x-sib-ratelimit-remaining"] == "0"
    assert 1 <= int(answer.headers["x-sib-ratelimit-reset"]) <= reset_at_most
    assert "Retry-After" not in answer.headers


CALLS = {
    "email": send_email,
    "contacts": create_contact,
    "smtp_other": read_log,
    "other": read_process,
}


# --- the limit ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CALLS))
def test_each_family_answers_429_past_its_limit_with_brevos_headers_and_no_retry_after(
    sandbox: Callable[..., str], name: str
) -> None:
    base = sandbox(limits={name: "2/h"})
    call = CALLS[name]

    first, second, third = call(base), call(base), call(base)

    assert first.status_code < 429 and second.status_code < 429
    assert [first.headers["x-sib-ratelimit-remaining"], second.headers["x-sib-ratelimit-remaining"]] == [
        "1",
        "0",
    ]
    assert first.headers["x-sib-ratelimit-limit"] == "2"
    assert "Retry-After" not in first.headers
    assert_too_many_requests(third, "2", 3600)
    counters = family(base, name)
    assert 1 <= counters.pop("reset") <= 3600
    assert counters | {"routes": None} == {
        "routes": None,
        "limit": "2/h",
        "used": 2,
        "remaining": 0,
        "accepted": 2,
        "refused": 1,
    }


def test_an_import_counts_in_the_contacts_family(sandbox: Callable[..., str]) -> None:
    base = sandbox(limits={"contacts": "1/h"})

    assert create_contact(base).status_code == 201
    assert_too_many_requests(import_contacts(base), "1", 3600)
    assert control(base, "stats")["imports"] == 0


def test_families_count_apart(sandbox: Callable[..., str]) -> None:
    base = sandbox(limits={"contacts": "1/h", "email": "1/h", "smtp_other": "1/h", "other": "1/h"})

    answers = [call(base) for call in CALLS.values()]

    assert all(a.status_code < 429 for a in answers), [a.status_code for a in answers]
    assert all(a.headers["x-sib-ratelimit-remaining"] == "0" for a in answers)


def test_a_refused_request_changes_no_state(sandbox: Callable[..., str]) -> None:
    base = sandbox(limits={"contacts": "1/h", "email": "1/h"})
    requests.post(
        f"{base}/_sandbox/faults", json={"path": "/v3/contacts", "status": 500, "match": "late"}, timeout=5
    )
    assert create_contact(base, "first@example.com").status_code == 201
    assert send_email(base).status_code == 201
    key = str(uuid.uuid4())
    refused_email = email_payload("other@example.com", headers={"idempotencyKey": key})

    assert create_contact(base, "late@example.com").status_code == 429
    assert send_email(base, refused_email).status_code == 429
    assert import_contacts(base).status_code == 429

    assert [c["email"] for c in control(base, "contacts")] == ["first@example.com"]
    assert len(control(base, "emails")) == 1
    assert [f["times"] for f in control(base, "faults")] == [1], "the fault was not used up"
    assert control(base, "imports") == []
    requests.put(f"{base}/_sandbox/limits", json={"limits": {"email": "off"}}, timeout=5).raise_for_status()
    assert send_email(base, refused_email).status_code == 201, "the refused email's key was not remembered"


def test_the_window_resets_and_the_family_takes_requests_again(sandbox: Callable[..., str]) -> None:
    base = sandbox(limits={"contacts": "2/s"})
    answers = [create_contact(base) for _ in range(3)]
    while answers[-1].status_code != 429:  # the three could straddle a window on a slow machine
        assert len(answers) < 60, "never refused"
        answers.append(create_contact(base))
    refused = answers[-1]
    assert_too_many_requests(refused, "2", 1)

    time.sleep(int(refused.headers["x-sib-ratelimit-reset"]) + 0.1)
    again = create_contact(base)

    assert again.status_code == 201
    assert again.headers["x-sib-ratelimit-remaining"] == "1", "a new window, with one request in it"
    assert family(base, "contacts")["refused"] == 1


def test_every_brevo_answer_carries_the_headers_and_a_missing_key_uses_none(
    sandbox: Callable[..., str],
) -> None:
    base = sandbox(limits={"contacts": "10/h"})  # an hour: the window cannot end mid-test
    created = create_contact(base)
    invalid = requests.post(f"{base}/v3/contacts", json={"email": "nope"}, headers=API_KEY, timeout=5)
    unknown = requests.get(f"{base}/v3/nothing-here", headers=API_KEY, timeout=5)
    no_key = requests.post(f"{base}/v3/contacts", json={"email": "a@b.co"}, timeout=5)
    email = send_email(base)

    assert [a.status_code for a in (created, invalid, unknown, no_key, email)] == [201, 400, 404, 401, 201]
    assert [created.headers["x-sib-ratelimit-limit"], created.headers["x-sib-ratelimit-remaining"]] == [
        "10",
        "9",
    ]
    assert invalid.headers["x-sib-ratelimit-remaining"] == "8"
    assert unknown.headers["x-sib-ratelimit-limit"] == "100"
    assert no_key.headers["x-sib-ratelimit-remaining"] == "8", "a request without a key does not count"
    assert email.headers["x-sib-ratelimit-limit"] == "1000"
    assert all(
        name in answer.headers for answer in (created, invalid, unknown, no_key) for name in LIMIT_HEADERS
    )
    assert family(base, "contacts")["accepted"] == 2


def test_the_control_api_and_the_page_are_never_limited(sandbox: Callable[..., str]) -> None:
    base = sandbox(limits={name: "1/h" for name in CALLS})

    answers = [requests.get(f"{base}/_sandbox/stats", timeout=5) for _ in range(5)]
    answers += [requests.get(f"{base}/", timeout=5) for _ in range(3)]

    assert [a.status_code for a in answers] == [200] * 8
    assert not any(name in a.headers for a in answers for name in LIMIT_HEADERS)


def test_a_family_turned_off_is_not_limited_and_sends_no_headers(sandbox: Callable[..., str]) -> None:
    base = sandbox(limits={"contacts": "off"})

    answers = [create_contact(base) for _ in range(15)]

    assert [a.status_code for a in answers] == [201] * 15
    assert "x-sib-ratelimit-limit" not in answers[-1].headers
    assert family(base, "contacts") | {"routes": None} == {
        "routes": None,
        "limit": "off",
        "used": 0,
        "remaining": None,
        "reset": None,
        "accepted": 15,
        "refused": 0,
    }


# --- tiers, options and the control API -------------------------------------------------------------

TIER_LIMITS = {
    "general": {"email": "1000/s", "contacts": "10/s", "smtp_other": "2/s", "other": "100/h"},
    "advanced": {"email": "2000/s", "contacts": "20/s", "smtp_other": "2/s", "other": "200/h"},
    "extended": {"email": "6000/s", "contacts": "60/s", "smtp_other": "2/s", "other": "200/h"},
}


@pytest.mark.parametrize("tier", list(TIER_LIMITS))
def test_a_tier_sets_brevos_published_limits(sandbox: Callable[..., str], tier: str) -> None:
    base = sandbox(tier=tier)

    limits = control(base, "limits")
    created = create_contact(base)

    assert limits["tier"] == tier and limits["overrides"] == {}
    assert {name: view["limit"] for name, view in limits["families"].items()} == TIER_LIMITS[tier]
    assert created.headers["x-sib-ratelimit-limit"] == TIER_LIMITS[tier]["contacts"].split("/")[0]


def test_the_sandbox_starts_on_the_general_tier(sandbox: Callable[..., str]) -> None:
    assert control(sandbox(), "limits")["tier"] == "general"


@pytest.mark.parametrize(
    ("option", "parsed"),
    [
        ("contacts=2/s", ("contacts", "2/s")),
        ("email=60/s", ("email", "60/s")),
        ("other=5/h", ("other", "5/h")),
    ]
    + [("smtp_other=off", ("smtp_other", "off"))],
)
def test_a_limit_option_names_a_family_and_a_rate(option: str, parsed: tuple[str, str]) -> None:
    assert parse_limit_option(option) == parsed


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("contacts", "FAMILY=N/s"),
        ("contact=2/s", "not a family"),
        ("contacts=2/m", "not a limit"),
        ("contacts=0/s", "not a limit"),
        ("contacts=-1/s", "not a limit"),
        ("contacts=fast", "not a limit"),
        ("contacts=", "not a limit"),
    ],
)
def test_a_bad_limit_option_is_refused_with_what_to_write(option: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_limit_option(option)


@pytest.mark.parametrize(
    "options",
    [{"tier": "gold"}, {"limits": {"contacts": "2/m"}}, {"limits": {"sms": "2/s"}}, {"limits": {"email": 5}}],
    ids=["tier", "rate", "family", "not-text"],
)
def test_make_server_refuses_a_bad_option_before_binding(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_server("127.0.0.1", 0, **options)


def test_the_command_line_takes_a_tier_and_repeated_limits(tmp_path: Path) -> None:
    with (tmp_path / "stderr.log").open("w") as stderr:
        proc, base = _start_sandbox(
            stderr, "--tier", "advanced", "--limit", "contacts=1/h", "--limit", "email=off"
        )
        try:
            limits = control(base, "limits")
            first, second = create_contact(base), create_contact(base)
        finally:
            assert _stop(proc) == 0

    assert limits["tier"] == "advanced"
    assert limits["overrides"] == {"contacts": "1/h", "email": "off"}
    assert {n: v["limit"] for n, v in limits["families"].items()} == {
        "email": "off",
        "contacts": "1/h",
        "smtp_other": "2/s",
        "other": "200/h",
    }
    assert (first.status_code, second.status_code) == (201, 429)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--limit", "contacts=fast"], "'fast' is not a limit: use N/s or N/h"),
        (["--limit", "sms=2/s"], "'sms' is not a family: use one of email, contacts, smtp_other, other"),
        (["--tier", "gold"], "invalid choice: 'gold'"),
    ],
)
def test_the_command_line_refuses_bad_limits_clearly(args: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "devstack.brevo_sandbox", "--port", "0", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert done.returncode == 2
    assert says in done.stderr
    assert "listening" not in done.stdout


def test_limits_are_set_at_run_time_and_reset_restores_the_start(sandbox: Callable[..., str]) -> None:
    base = sandbox(limits={"email": "5/h"})
    create_contact(base)

    put = requests.put(
        f"{base}/_sandbox/limits", json={"tier": "extended", "limits": {"contacts": "1/h"}}, timeout=5
    )
    first, second = create_contact(base), create_contact(base)

    assert put.status_code == 200 and put.json()["tier"] == "extended"
    assert put.json()["overrides"] == {"contacts": "1/h"}
    assert put.json()["families"]["email"]["limit"] == "6000/s", "a PUT replaces every override"
    assert (first.status_code, second.status_code) == (201, 429)
    assert family(base, "contacts")["accepted"] == 2, "totals outlive a change of limits"
    assert requests.post(f"{base}/_sandbox/reset", timeout=5).status_code == 204
    limits = control(base, "limits")
    assert (limits["tier"], limits["overrides"]) == ("general", {"email": "5/h"})
    assert limits["families"]["contacts"] | {"routes": None} == {
        "routes": None,
        "limit": "10/s",
        "used": 0,
        "remaining": 10,
        "reset": 1,
        "accepted": 0,
        "refused": 0,
    }


@pytest.mark.parametrize(
    "body",
    [{"tier": "gold"}, {"limits": {"contacts": "2/m"}}, {"limits": ["contacts=2/s"]}, {"contacts": "2/s"}],
    ids=["tier", "rate", "not-an-object", "unknown-key"],
)
def test_a_bad_limits_change_is_refused_and_changes_nothing(sandbox: Callable[..., str], body: Any) -> None:
    base = sandbox(limits={"contacts": "3/h"})

    answer = requests.put(f"{base}/_sandbox/limits", json=body, timeout=5)

    assert answer.status_code == 400 and answer.json()["code"] == "invalid_parameter"
    assert family(base, "contacts")["limit"] == "3/h"


def test_a_page_on_another_site_cannot_change_the_limits(sandbox: Callable[..., str]) -> None:
    base = sandbox()

    answer = requests.put(
        f"{base}/_sandbox/limits",
        json={"tier": "extended"},
        headers={"Origin": "https://evil.example"},
        timeout=5,
    )

    assert answer.status_code == 403
    assert control(base, "limits")["tier"] == "general"


# --- counters on the page -----------------------------------------------------------------------------


def test_the_page_shows_each_familys_limit_use_remaining_and_429s(sandbox: Callable[..., str]) -> None:
    base = sandbox(limits={"contacts": "1/h", "email": "1000/h"})
    create_contact(base)
    create_contact(base)
    create_contact(base)
    send_email(base)

    page = requests.get(f"{base}/", timeout=5).text

    assert "Rate limits (general tier)" in page
    assert "<td>1/h</td><td>1</td><td>0</td><td>1</td><td>2</td>" in page  # limit, used, left, accepted, 429s
    assert "<td>1000/h</td><td>1</td><td>999</td><td>1</td><td>0</td>" in page
    assert "<td>100/h</td><td>0</td><td>100</td><td>0</td><td>0</td>" in page
    assert "every other /v3/smtp/ route" in page


# --- the 429 storm -------------------------------------------------------------------------------------


def add_fault(base: str, **spec: Any) -> requests.Response:
    return requests.post(f"{base}/_sandbox/faults", json=spec, timeout=5)


def test_a_storm_answers_a_number_of_requests_with_429_then_passes(sandbox: Callable[..., str]) -> None:
    base = sandbox()
    storm = add_fault(base, family="contacts", times=2)

    answers = [create_contact(base) for _ in range(3)]

    assert storm.status_code == 201
    assert_too_many_requests(answers[0], "10", 1)
    assert_too_many_requests(answers[1], "10", 1)
    assert answers[2].status_code == 201
    assert answers[2].headers["x-sib-ratelimit-remaining"] == "9", "stormed requests used no window"
    assert [c["email"] for c in control(base, "contacts")] == [json.loads(answers[2].request.body)["email"]]
    assert (family(base, "contacts")["accepted"], family(base, "contacts")["refused"]) == (1, 2)
    assert control(base, "faults") == []


def test_a_storm_for_some_seconds_refuses_every_request_of_its_family_only(
    sandbox: Callable[..., str],
) -> None:
    base = sandbox()
    add_fault(base, family="email", seconds=600)

    emails = [send_email(base) for _ in range(4)]
    contact = create_contact(base)
    [listed] = control(base, "faults")

    for answer in emails:
        assert_too_many_requests(answer, "1000", 600)
    assert contact.status_code == 201
    assert listed | {"id": 0} == {
        "id": 0,
        "path": None,
        "family": "email",
        "status": 429,
        "times": None,
        "seconds": 600,
        "match": None,
        "delay_seconds": 0.0,
        "body": {"code": "too_many_requests", "message": listed["body"]["message"]},
        "headers": {},
    }
    assert requests.delete(f"{base}/_sandbox/faults", timeout=5).status_code == 204
    assert send_email(base).status_code == 201
    assert control(base, "emails") and family(base, "email")["refused"] == 4


def test_a_storm_ends_when_its_seconds_are_up(sandbox: Callable[..., str]) -> None:
    base = sandbox()
    add_fault(base, family="smtp_other", seconds=5)
    stormed = read_log(base)
    assert_too_many_requests(stormed, "2", 5)  # the reset is the seconds the storm has left

    time.sleep(int(stormed.headers["x-sib-ratelimit-reset"]) + 0.1)

    assert read_log(base).status_code == 200
    assert control(base, "faults") == []


def test_a_storm_takes_the_faults_own_body_and_headers(sandbox: Callable[..., str]) -> None:
    base = sandbox()
    body = {"code": "too_many_requests", "message": "slow down"}
    add_fault(base, family="other", times=1, body=body, headers={"x-sib-ratelimit-reset": "42"})

    answer = read_process(base)

    assert answer.status_code == 429 and answer.json() == body
    assert answer.headers["x-sib-ratelimit-reset"] == "42"
    assert answer.headers["x-sib-ratelimit-limit"] == "100"


@pytest.mark.parametrize(
    "spec",
    [
        {"family": "sms", "times": 1},
        {"family": "email", "status": 500},
        {"family": "email", "seconds": 0},
        {"family": "email", "seconds": "5"},
        {"family": "email", "times": 0},
        {"family": "email", "match": "a@b.co"},
        {"family": "email", "path": "/v3/smtp/email"},
        {"family": "email", "delay_seconds": 1},
    ],
    ids=str,
)
def test_a_bad_storm_is_refused(sandbox: Callable[..., str], spec: dict[str, Any]) -> None:
    base = sandbox()

    answer = add_fault(base, **spec)

    assert answer.status_code == 400 and answer.json()["code"] == "invalid_parameter"
    assert control(base, "faults") == []


def test_a_429_fault_on_a_path_reports_the_familys_real_limit(sandbox: Callable[..., str]) -> None:
    base = sandbox(tier="advanced")
    add_fault(base, path="/v3/contacts", status=429)

    answer = create_contact(base)

    assert_too_many_requests(answer, "20", 1)


def test_the_429_docs_development_prints_is_the_sandboxs_word_for_word(sandbox: Callable[..., str]) -> None:
    """The printed 429 (docs/development.md, "--limit contacts=2/s") against a real one: status
    line, the three headers (a one-second window resets in 1) and the body."""
    page = (ROOT / "docs" / "development.md").read_text()
    (printed,) = [b for b in page.split("```text\n")[1:] if b.startswith("HTTP/1.1 429")]
    status, *headers = printed.split("\n\n", 1)[0].splitlines()
    body = json.loads(printed.split("\n\n", 1)[1].split("```", 1)[0])
    base = sandbox(limits={"contacts": "2/s"})

    answers = [create_contact(base) for _ in range(3)]

    refused = answers[-1]
    assert status == f"HTTP/1.1 {refused.status_code} {refused.reason}"
    for line in headers:
        name, value = line.split(": ")
        assert refused.headers[name] == value, line
    assert refused.json() == body
