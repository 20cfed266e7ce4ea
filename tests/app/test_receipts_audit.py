"""Receipts as an audit trail, end to end: signatures an auditor verifies with the published keys
(through rotation), the finance listing, and the download link that redeems the emailed token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import time
import uuid
from datetime import datetime, timezone

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from jose import jwt

from devstack.seed_bundles import sample_bundle
from devstack.services import dev_settings
from shared.config.keys import KeySet, public_jwk
from shared.purchase.catalog import BUNDLES
from shared.purchase.tokens import AUDIENCE
from tests.support import (
    ROOT,
    UNKNOWN_BUNDLE_ID,
    Buyer,
    drain_until_empty,
    new_ec_key,
    private_pem,
    run_module,
)

DEV_KEY = dev_settings()["STOREFRONT_SIGNING_KEY"].replace("\\n", "\n")
ISSUER = dev_settings()["STOREFRONT_PUBLIC_BASE_URL"]


def verify_tool(*args: str) -> subprocess.CompletedProcess:
    return run_module("ops.verify_receipt", *args)


def receipt_url(host_url: str, receipt: dict) -> str:
    return f"{host_url}/api/receipts/{receipt['receipt_id']}"


def token_from_email(mail, email: str) -> str:
    link = next(link for link in mail.emails_to(email)[-1]["links"] if "/api/download/" in link)
    return link.rsplit("/", 1)[1]


# --- signatures --------------------------------------------------------------------------------


def test_issued_and_replayed_receipts_verify_with_the_published_keys(buyer, tmp_path):
    keyed = {"email": buyer.email, "idempotency_key": buyer.key}
    first = buyer.purchase(keyed)
    replay = buyer.purchase(keyed)
    via_mcp = buyer.call_tool({"email": buyer.email, "idempotency_key": buyer.key + "-mcp"}).json()

    url = receipt_url(buyer.host, first.json())
    saved = tmp_path / "receipt.json"
    saved.write_bytes(replay.content)
    jwks = f"{buyer.host}/api/.well-known/jwks.json"
    mcp_file = tmp_path / "mcp.json"
    mcp_file.write_text(via_mcp["result"]["content"][0]["text"])

    by_url = verify_tool(url)
    by_file = verify_tool(str(saved), "--jwks", jwks)
    mcp_receipt = verify_tool(str(mcp_file), "--jwks", jwks)

    assert by_url.returncode == 0, by_url.stdout
    assert by_url.stdout.startswith(f"VALID: receipt {first.json()['receipt_id']}")
    assert by_file.returncode == 0, by_file.stdout
    assert mcp_receipt.returncode == 0, mcp_receipt.stdout
    assert replay.json()["signature"] == first.json()["signature"]


# Issued by a dev host before the keys were published at the domain root (JWKS only under /api/).
ISSUED_BEFORE_THE_ROOT_JWKS = ROOT / "tests" / "fixtures" / "receipts" / "issued_before_the_root_jwks.json"


def test_a_receipt_issued_before_the_root_jwks_verifies_with_it(host, tmp_path):
    jwks = f"{host.url}/.well-known/jwks.json"
    changed = tmp_path / "changed.json"
    changed.write_bytes(
        ISSUED_BEFORE_THE_ROOT_JWKS.read_bytes().replace(b"Agent Starter Kit", b"Agent Starter Kid")
    )

    verified = verify_tool(str(ISSUED_BEFORE_THE_ROOT_JWKS), "--jwks", jwks)
    tampered = verify_tool(str(changed), "--jwks", jwks)

    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.startswith("VALID: receipt rcpt_fmrgbo7xeh522uvllo223bejfa")
    assert tampered.returncode == 1, tampered.stdout


@pytest.mark.parametrize("position", ["start", "middle", "end", "whitespace", "signature"])
def test_a_receipt_with_any_byte_changed_fails_verification(buyer, tmp_path, position):
    body = bytearray(buyer.purchase().content)
    index = {
        "start": 2,
        "middle": len(body) // 2,
        "end": len(body) - 3,
        "whitespace": body.index(b"\n  "),
        "signature": body.index(b'"jws": "') + 12,
    }[position]
    body[index] = ord("X") if body[index] != ord("X") else ord("Y")
    changed = tmp_path / "changed.json"
    changed.write_bytes(bytes(body))

    result = verify_tool(str(changed), "--jwks", f"{buyer.host}/api/.well-known/jwks.json")

    assert result.returncode in (1, 2), result.stdout
    assert result.stdout.startswith(("INVALID", "UNREADABLE"))


def test_a_reformatted_receipt_fails_unless_reformatting_is_allowed(buyer, tmp_path):
    receipt = buyer.purchase().json()
    reformatted = tmp_path / "pretty.json"
    reformatted.write_text(json.dumps(receipt, indent=4, sort_keys=True))
    jwks = f"{buyer.host}/api/.well-known/jwks.json"

    strict = verify_tool(str(reformatted), "--jwks", jwks)
    lenient = verify_tool(str(reformatted), "--jwks", jwks, "--allow-reformatted")

    assert strict.returncode == 1
    assert "bytes differ" in strict.stdout
    assert lenient.returncode == 0, lenient.stdout


def test_verification_against_another_stores_keys_fails(buyer, tmp_path):
    other = tmp_path / "jwks.json"
    other.write_text(json.dumps(KeySet.load(private_pem(new_ec_key())).jwks()))

    result = verify_tool(receipt_url(buyer.host, buyer.purchase().json()), "--jwks", str(other))

    assert result.returncode == 1
    assert "no published key" in result.stdout


def test_a_receipt_file_needs_the_jwks_given_not_one_the_receipt_names(buyer, tmp_path):
    saved = tmp_path / "receipt.json"
    saved.write_bytes(buyer.purchase().content)

    result = verify_tool(str(saved))

    assert result.returncode == 2
    assert "--jwks" in result.stdout


def test_unreadable_input_exits_2(tmp_path):
    assert verify_tool(str(tmp_path / "missing.json"), "--jwks", str(tmp_path / "x")).returncode == 2


def test_a_forged_receipt_cannot_make_the_verdict_line_lie_on_a_terminal(buyer, tmp_path):
    receipt = buyer.purchase().json()
    forged_id = "rcpt_x\r\x1b[2K\x1b[32mVALID: receipt rcpt_x is signed by the store's key, unaltered\x1b[0m"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**receipt, "receipt_id": forged_id}, indent=2, ensure_ascii=False))

    result = verify_tool(str(forged), "--jwks", f"{buyer.host}/api/.well-known/jwks.json")

    assert result.returncode == 1
    assert result.stdout.startswith("INVALID: receipt rcpt_x\\r\\x1b[2K\\x1b[32mVALID: receipt rcpt_x")
    assert result.stdout.count("\n") == 1 and result.stdout.endswith("\n")
    assert not any(char in result.stdout for char in "\r\x1b")


def test_a_receipt_or_jwks_nested_too_deep_for_the_parser_is_a_verdict_not_a_traceback(buyer, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    saved_jwks = tmp_path / "jwks.json"
    saved_jwks.write_text(requests.get(f"{buyer.host}/api/.well-known/jwks.json", timeout=10).text)

    deep_receipt = verify_tool(str(deep), "--jwks", str(saved_jwks))
    deep_jwks = verify_tool(str(saved_jwks), "--jwks", str(deep))

    assert (deep_receipt.returncode, deep_receipt.stdout) == (
        1,
        "INVALID: receipt (unreadable): not a JSON receipt\n",
    )
    assert deep_jwks.returncode == 2 and deep_jwks.stdout.startswith("UNREADABLE: ")
    assert deep_receipt.stderr == deep_jwks.stderr == ""


def test_jwks_publishes_public_keys_only(buyer):
    keys = requests.get(f"{buyer.host}/api/.well-known/jwks.json", timeout=10).json()["keys"]

    assert [k["kid"] for k in keys] == [KeySet.load(DEV_KEY).kid]
    assert all(k["kty"] == "EC" and k["alg"] == "ES256" and k["use"] == "sig" for k in keys)
    assert not any("d" in k for k in keys)


def test_after_a_key_rotation_old_receipts_and_tokens_still_verify(host_factory, mail, tmp_path):
    old_host = host_factory()
    old_buyer = Buyer(old_host.url)
    old_receipt = old_buyer.purchase().json()
    old_token = token_from_email(mail, old_buyer.email)
    retired = json.dumps([public_jwk(serialization.load_pem_private_key(DEV_KEY.encode(), None))])
    rotated = host_factory(
        STOREFRONT_SIGNING_KEY=private_pem(new_ec_key()), STOREFRONT_RETIRED_PUBLIC_KEYS=retired
    )
    forgotten = host_factory(STOREFRONT_SIGNING_KEY=private_pem(new_ec_key()))
    saved = tmp_path / "old.json"
    saved.write_bytes(requests.get(receipt_url(old_host.url, old_receipt), timeout=10).content)
    new_buyer = Buyer(rotated.url)
    new_receipt = new_buyer.purchase().json()

    keys = requests.get(f"{rotated.url}/api/.well-known/jwks.json", timeout=10).json()["keys"]
    old_verified = verify_tool(str(saved), "--jwks", f"{rotated.url}/api/.well-known/jwks.json")
    new_verified = verify_tool(receipt_url(rotated.url, new_receipt))
    old_download = requests.get(f"{rotated.url}/api/download/{old_token}", timeout=10)
    forgotten_verified = verify_tool(str(saved), "--jwks", f"{forgotten.url}/api/.well-known/jwks.json")
    old_verified_at_root = verify_tool(str(saved), "--jwks", f"{rotated.url}/.well-known/jwks.json")
    forgotten_download = requests.get(f"{forgotten.url}/api/download/{old_token}", timeout=10)

    assert len(keys) == 2 and keys[1]["kid"] == old_receipt["signature"]["kid"]
    assert new_receipt["signature"]["kid"] == keys[0]["kid"] != old_receipt["signature"]["kid"]
    assert old_verified.returncode == 0, old_verified.stdout
    assert old_verified_at_root.returncode == 0, old_verified_at_root.stdout
    assert new_verified.returncode == 0, new_verified.stdout
    assert old_download.status_code == 200
    assert forgotten_verified.returncode == 1
    assert forgotten_download.status_code == 401


# --- the receipt URL stays read-only --------------------------------------------------------------


def test_viewing_a_receipt_triggers_nothing(buyer, mail):
    receipt = buyer.purchase().json()
    url = receipt_url(buyer.host, receipt)

    for accept in ("application/json", "text/html", "*/*"):
        assert buyer.http.get(url, headers={"Accept": accept}, timeout=10).status_code == 200
    others = [buyer.http.request(m, url, timeout=10) for m in ("POST", "PUT", "DELETE", "PATCH")]

    assert [(a.status_code, a.headers["Allow"]) for a in others] == [(405, "GET, HEAD")] * 4
    assert len(mail.emails_to(buyer.email)) == 1
    drain_until_empty(buyer.host)
    contact = mail.contact(buyer.email)
    assert contact is not None and (contact["upserts"], contact["modifications"]) == (1, 0)


@pytest.mark.parametrize("channel", ["http", "mcp"])
def test_control_characters_in_the_user_agent_never_reach_the_receipt_or_its_page_raw(
    buyer, tmp_path, channel
):
    agent = "agent/1.0\x00\x1b[2J\x1b]0;owned\x07\x85 (forged)"
    headers = {"User-Agent": agent}
    if channel == "http":
        response = buyer.purchase(headers=headers)
        body = response.content
    else:
        response = buyer.call_tool({"email": buyer.email}, headers=headers)
        body = response.json()["result"]["content"][0]["text"].encode()
    receipt = json.loads(body)
    url = receipt_url(buyer.host, receipt)
    page = buyer.http.get(url, headers={"Accept": "text/html"}, timeout=10).text
    saved = tmp_path / "receipt.json"
    saved.write_bytes(buyer.http.get(url, timeout=10).content)

    shown = r"agent/1.0\x00\x1b[2J\x1b]0;owned\x07\x85 (forged)"
    assert receipt["caller"] == {"channel": channel, "user_agent": shown, "agent": {"verified": False}}
    assert not any(char in saved.read_text() for char in "\x00\x1b\x07\x85")
    assert f"<code>{shown}</code>" in page
    assert not any(char in page for char in "\x00\x1b\x07\x85")
    assert verify_tool(str(saved), "--jwks", f"{buyer.host}/api/.well-known/jwks.json").returncode == 0


def test_a_browser_gets_the_receipt_page_and_an_agent_the_stored_bytes(buyer):
    response = buyer.purchase()
    url = receipt_url(buyer.host, response.json())

    page = buyer.http.get(url, headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, timeout=10)
    raw = buyer.http.get(url, headers={"Accept": "application/json"}, timeout=10)

    assert page.headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert "Security audit" in page.text and "Finance billing view" in page.text
    assert buyer.email not in page.text
    assert raw.content == response.content


# --- finance ----------------------------------------------------------------------------------------


def test_finance_listing_totals_match_the_receipts_issued(host_factory):
    host = host_factory(
        STOREFRONT_LEDGER_TABLE=f"ledger{uuid.uuid4().hex[:8]}",
        STOREFRONT_COST_PER_PURCHASE_USD="0.015",
    )
    issued = [Buyer(host.url).purchase().json() for _ in range(5)]
    Buyer(host.url).purchase({"email": "refused"})
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")

    listing = requests.get(f"{host.url}/api/receipts", params={"date": today}, timeout=10).json()
    seen, cursor = [], None
    while True:
        params = {"date": today, "page_size": 2, **({"cursor": cursor} if cursor else {})}
        page = requests.get(f"{host.url}/api/receipts", params=params, timeout=10).json()
        seen += [r["receipt_id"] for r in page["receipts"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    html_page = requests.get(
        f"{host.url}/api/receipts", params={"date": today}, headers={"Accept": "text/html"}, timeout=10
    )

    assert listing["count"] == 5
    assert listing["totals"] == {"USD": {"amount": "0.00", "cost_estimate": "0.075"}}
    assert sorted(seen) == sorted(r["receipt_id"] for r in issued)
    assert all(r["receipt_id"] in html_page.text for r in issued)
    other_day = requests.get(f"{host.url}/api/receipts", params={"date": "2001-01-01"}, timeout=10).json()
    assert other_day["count"] == 0


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"date": "30-11-2026"}, "invalid_date"),
        ({"page_size": "0"}, "invalid_page_size"),
        ({"page_size": "x"}, "invalid_page_size"),
        ({"page_size": "+5"}, "invalid_page_size"),
        ({"page_size": " 5"}, "invalid_page_size"),
        ({"page_size": "1_0"}, "invalid_page_size"),
        ({"page_size": "٥"}, "invalid_page_size"),
        ({"page_size": "9" * 5000}, "invalid_page_size"),  # past int()'s digit limit: was a 500
        ({"cursor": "!!!"}, "invalid_cursor"),
        ({"cursor": base64.urlsafe_b64encode(b"[" * 3000).decode()}, "invalid_cursor"),
        ({"cursor": base64.urlsafe_b64encode(b'{"RowKey": "\\ud800"}').decode()}, "invalid_cursor"),
    ],
)
def test_finance_listing_refuses_bad_parameters_with_400(buyer, params, code):
    response = requests.get(f"{buyer.host}/api/receipts", params=params, timeout=10)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize("day", ["0001-01-01", "9999-12-31"])
def test_the_first_and_last_days_of_the_calendar_list_as_pages_and_json(buyer, day):
    url = f"{buyer.host}/api/receipts"

    page = requests.get(url, params={"date": day}, headers={"Accept": "text/html"}, timeout=10)
    listing = requests.get(url, params={"date": day}, timeout=10)

    assert page.status_code == 200, page.text
    assert f"No receipts were issued on {day}." in page.text
    assert page.text.count("Previous day (") + page.text.count("Next day (") == 1  # only the one that exists
    assert listing.status_code == 200
    assert listing.json()["count"] == 0


# --- downloads -----------------------------------------------------------------------------------


def test_the_emailed_link_downloads_the_exact_bundle(buyer, mail):
    buyer.purchase({"email": buyer.email, "bundle_id": "mcp-field-guide"})
    token = token_from_email(mail, buyer.email)

    response = requests.get(f"{buyer.host}/api/download/{token}", timeout=10)

    assert response.status_code == 200
    assert response.content == sample_bundle(BUNDLES["mcp-field-guide"])
    assert response.headers["Content-Type"] == "application/zip"
    assert 'filename="mcp-field-guide.zip"' in response.headers["Content-Disposition"]


def _claims(**overrides) -> dict:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "agent-starter-kit",
        "jti": "j",
        "iat": now,
        "exp": now + 600,
    }
    return {**claims, **overrides}


def _signed(claims: dict, pem: str = DEV_KEY) -> str:
    return jwt.encode(claims, pem, algorithm="ES256", headers={"kid": KeySet.load(pem).kid})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _alg_none() -> str:
    header = _b64(json.dumps({"alg": "none", "kid": KeySet.load(DEV_KEY).kid}).encode())
    return f"{header}.{_b64(json.dumps(_claims()).encode())}."


def _hs256_with_public_key() -> str:
    public_pem = (
        serialization.load_pem_private_key(DEV_KEY.encode(), None)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": KeySet.load(DEV_KEY).kid}).encode())
    payload = _b64(json.dumps(_claims()).encode())
    signature = hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


def _tampered() -> str:
    header, _, signature = _signed(_claims()).split(".")
    return f"{header}.{_b64(json.dumps(_claims(sub='mcp-field-guide')).encode())}.{signature}"


ATTACKS = {
    "expired": (lambda: _signed(_claims(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600)), 401),
    "tampered-claims": (_tampered, 401),
    "alg-none": (_alg_none, 401),
    "hs256-with-public-key": (_hs256_with_public_key, 401),
    "unpublished-key": (lambda: _signed(_claims(), private_pem(new_ec_key())), 401),
    "wrong-audience": (lambda: _signed(_claims(aud="someone-else")), 403),
    "unknown-bundle": (lambda: _signed(_claims(sub=UNKNOWN_BUNDLE_ID)), 403),
    "garbage": (lambda: "not-a-token", 401),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_every_token_attack_is_refused_without_the_file(buyer, attack):
    make, status = ATTACKS[attack]

    response = requests.get(f"{buyer.host}/api/download/{make()}", timeout=10)

    assert response.status_code == status, response.text
    assert response.json()["error"]["message"]
    assert response.content != sample_bundle(BUNDLES["agent-starter-kit"])
    assert b"PK\x03\x04" not in response.content
