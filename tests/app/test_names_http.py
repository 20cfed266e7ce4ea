"""Names through a real purchase (dev host, Azurite, the Brevo sandbox): a link in any disguise is
refused before anything reaches the stranger's inbox, and real people are greeted as they wrote
their names. The names come from the fixtures tests/shared/purchase/test_names.py checks whole."""

from __future__ import annotations

import html
import json

import pytest

from tests.support import ROOT, unique_email

FIXTURES = ROOT / "tests" / "fixtures"
PHISHING = [
    "paypal\ua4f8com/verify",
    "evil dot com",
    "hxxps[:]//evil[.]com",
    "evil. com",
    "evil\u3002com",
    "evil.\u0441\u043em",
]
REAL = [
    "J.K.Rowling",
    "A.R.Rahman",
    "St.John Smith",
    "John Smith, M.Sc.",
    "Md. Al Amin",
    "Dr. med. Hans Müller",
]


def names_in(file: str) -> set[str]:
    return {entry["name"] for entry in json.loads((FIXTURES / file).read_text(encoding="utf-8"))}


def test_the_names_sent_end_to_end_are_the_fixtures_own():
    assert set(PHISHING) <= names_in("names_phishing.json")
    assert set(REAL) <= names_in("names_real.json")


@pytest.mark.parametrize("name", PHISHING)
def test_a_disguised_link_in_the_name_is_refused_and_nothing_is_sent(buyer, mail, name):
    victim = unique_email("victim")

    response = buyer.purchase({"email": victim, "name": name})

    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_name"
    assert mail.emails_to(victim) == []
    assert mail.contact(victim) is None


@pytest.mark.parametrize("name", REAL)
def test_a_real_name_is_fulfilled_and_greeted_as_written(buyer, mail, name):
    response = buyer.purchase({"email": buyer.email, "name": name})

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "fulfilled"
    [email] = mail.emails_to(buyer.email)
    assert email["to"] == [{"email": buyer.email, "name": name}]
    assert email["textContent"].startswith(f"Hello {name},\n")
    assert f"<p>Hello {html.escape(name)},</p>" in email["htmlContent"]
