"""shared.protocols.api: the HTTP endpoints as plain functions (health, receipt, JWKS, download, bundles and
day-listing answers), called directly without a host; the primitives they share with the other
adapters are tests/shared/protocols/test_http.py's."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shared import __version__
from shared.config.errors import (
    BundleUnavailable,
    Forbidden,
    InvalidRequest,
    InvalidToken,
    NotConfigured,
    StorageOutage,
)
from shared.config.keys import KeySet
from shared.config.settings import SECRET_SETTINGS, Settings
from shared.protocols import api
from shared.protocols.api import health, purchase, receipt
from shared.protocols.downloads import Download
from shared.protocols.http import Request
from shared.purchase.catalog import find_bundle, listing
from shared.purchase.receipt import signatures
from shared.purchase.receipt.document import encode, new_receipt_id
from shared.seams.contact_queue import Backlog
from shared.seams.ledger import DayListing

# --- answers ---------------------------------------------------------------------------------------


EMPTY = Backlog(waiting=0, oldest_seconds=None, poisoned=0)
NO_BACKLOG = {"waiting": 0, "oldest_seconds": None, "poisoned": 0}


class _Storage:
    """What health asks of `shared.protocols.readiness.StorageProbe`: the storage problems, if any,
    and the contact backlog the probe read (None when it could not read it)."""

    def __init__(self, *problems: str, backlog: Backlog | None = EMPTY):
        self._problems = list(problems)
        self._backlog = backlog

    def problems(self) -> list[str]:
        return list(self._problems)

    def backlog(self) -> Backlog | None:
        return self._backlog

    def missing_bundles(self) -> list[str]:
        return []


def _health(settings: Settings, keys=lambda: KEYS, storage=None):
    return health(SimpleNamespace(settings=settings, keys=keys, storage=storage or _Storage()))


def test_health_is_ok_when_every_secret_is_set_and_storage_answers():
    answer = _health(Settings())

    assert answer.status == 200
    assert json.loads(answer.body) == {
        "status": "ok",
        "version": __version__,
        "missing_settings": [],
        "missing_bundles": [],
        "problems": [],
        "contacts": NO_BACKLOG,
    }
    assert answer.headers == {"Content-Type": "application/json", "Cache-Control": "no-store"}


def test_health_is_unconfigured_503_and_names_the_missing_settings():
    answer = _health(Settings(missing_secrets=SECRET_SETTINGS), keys=_no_keys)

    assert answer.status == 503
    assert answer.headers == {"Content-Type": "application/json", "Cache-Control": "no-store"}
    assert json.loads(answer.body) == {
        "status": "unconfigured",
        "version": __version__,
        "missing_settings": ["BREVO_API_KEY", "STOREFRONT_SIGNING_KEY", "STOREFRONT_HASH_SECRET"],
        "missing_bundles": [],
        "problems": [
            "BREVO_API_KEY is not set",
            "STOREFRONT_SIGNING_KEY is not set",
            "STOREFRONT_HASH_SECRET is not set",
        ],
        "contacts": NO_BACKLOG,
    }


def test_health_never_reveals_secret_values():
    settings = Settings.from_env(
        {"BREVO_API_KEY": "xkeysib-secret", "STOREFRONT_HASH_SECRET": "hash-secret-value"}
    )

    body = _health(settings, keys=_no_keys).body.decode()

    assert "xkeysib-secret" not in body and "hash-secret-value" not in body
    assert json.loads(body)["missing_settings"] == ["STOREFRONT_SIGNING_KEY"]


def test_health_names_a_signing_key_that_is_set_but_unusable():
    # The settings refuse such a key at start-up; settings that came to hold one still get a 503.
    settings = Settings(brevo_api_key="k", hash_secret="h", signing_key_pem="not a pem")

    answer = _health(settings, keys=lambda: KeySet.load(settings.signing_key_pem))
    body = json.loads(answer.body)

    assert answer.status == 503
    assert body["status"] == "unconfigured"
    assert body["missing_settings"] == ["STOREFRONT_SIGNING_KEY"]
    assert body["problems"] == ["STOREFRONT_SIGNING_KEY is not a usable EC P-256 private key"]
    assert "not a pem" not in answer.body.decode()


@pytest.mark.parametrize("name", SECRET_SETTINGS)
def test_health_names_an_unresolved_key_vault_reference_without_echoing_it(name):
    reference = "@Microsoft.KeyVault(SecretUri=https://shop-kv.vault.azure.net/secrets/s3cr3t/)"
    values = {"BREVO_API_KEY": "k", "STOREFRONT_HASH_SECRET": "h", "STOREFRONT_SIGNING_KEY": KEYS.private_pem}
    settings = Settings.from_env({**values, name: reference})
    keys = (lambda: KEYS) if name != "STOREFRONT_SIGNING_KEY" else _no_keys

    answer = _health(settings, keys=keys)
    body = json.loads(answer.body)

    assert answer.status == 503
    assert body["status"] == "unconfigured"
    assert body["missing_settings"] == [name]
    assert body["problems"] == [f"{name} is an unresolved Key Vault reference"]
    assert "shop-kv" not in answer.body.decode() and "s3cr3t" not in answer.body.decode()


def test_health_names_an_unresolved_reference_in_a_setting_that_is_no_secret():
    settings = Settings.from_env(
        {
            "BREVO_API_KEY": "k",
            "STOREFRONT_HASH_SECRET": "h",
            "STOREFRONT_SIGNING_KEY": KEYS.private_pem,
            "STOREFRONT_SENDER_EMAIL": "@Microsoft.KeyVault(VaultName=shop-kv;SecretName=sender)",
        }
    )

    body = json.loads(_health(settings).body)

    assert body["missing_settings"] == ["STOREFRONT_SENDER_EMAIL"]
    assert body["status"] == "unconfigured"


def test_health_is_unavailable_503_and_says_what_storage_did():
    storage = _Storage(
        "table storage refused the app's identity (403)",
        "blob storage unreachable (ServiceRequestError)",
        "queue storage refused the app's identity (403)",
        backlog=None,
    )

    answer = _health(Settings(), storage=storage)

    assert answer.status == 503
    assert answer.headers["Cache-Control"] == "no-store"
    assert json.loads(answer.body) == {
        "status": "unavailable",
        "version": __version__,
        "missing_settings": [],
        "missing_bundles": [],
        "problems": [
            "table storage refused the app's identity (403)",
            "blob storage unreachable (ServiceRequestError)",
            "queue storage refused the app's identity (403)",
        ],
        "contacts": None,  # the queue could not be read: no backlog rather than a made-up one
    }


def test_health_reports_settings_and_storage_problems_together():
    storage = _Storage("blob storage did not answer within 5 s")

    body = json.loads(_health(Settings(missing_secrets=("BREVO_API_KEY",)), storage=storage).body)

    assert body["status"] == "unconfigured"
    assert body["problems"] == ["BREVO_API_KEY is not set", "blob storage did not answer within 5 s"]


def test_health_reports_the_contact_backlog_as_the_probe_read_it():
    storage = _Storage(backlog=Backlog(waiting=12, oldest_seconds=73.26, poisoned=1))

    answer = _health(Settings(), storage=storage)

    assert answer.status == 200  # a backlog is the drainer's to work off, not a reason to stop selling
    assert json.loads(answer.body)["contacts"] == {"waiting": 12, "oldest_seconds": 73.3, "poisoned": 1}


def test_health_reports_a_real_backlog_and_names_no_address_waiting_in_it(azurite):
    import uuid

    from shared.seams.storage import container_client, table_client
    from shared.seams.storage_probe import StorageProbe
    from tests.support import own_queue, unique_email

    queue = own_queue(azurite)
    buyers = [unique_email("backlog") for _ in range(3)]
    for n, email in enumerate(buyers):
        queue.enqueue(email, f"Buyer Number{n}")
    suffix = uuid.uuid4().hex[:10]
    probe = StorageProbe(
        table_client(azurite, f"idem{suffix}", 5),
        container_client(azurite, f"rcpt{suffix}", 5),
        timeout=5.0,
        backlog=queue.backlog,
    )

    answer = _health(Settings(), storage=probe)
    body = answer.body.decode()
    contacts = json.loads(body)["contacts"]

    assert answer.status == 200, body
    assert contacts["waiting"] == 3 and contacts["poisoned"] == 0
    assert contacts["oldest_seconds"] is not None and contacts["oldest_seconds"] >= 0
    assert "@" not in body and "Number" not in body
    assert not any(email.split("@")[0] in body for email in buyers)


# --- receipt and purchase endpoints with stub services ---------------------------------------------

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


class _Receipts:
    def __init__(self, stored: dict[str, bytes] | None = None, down: bool = False):
        self.stored = stored or {}
        self.down = down
        self.reads: list[str] = []

    def read(self, receipt_id: str) -> bytes | None:
        self.reads.append(receipt_id)
        if self.down:
            raise StorageOutage("blob storage unavailable: ServiceRequestError")
        return self.stored.get(receipt_id)


class _Store:
    def __init__(self, receipts: _Receipts):
        self.receipts = receipts

    def stored_receipt(self, receipt_id: str) -> bytes | None:
        return self.receipts.read(receipt_id)

    def purchase(self, call):  # pragma: no cover - must not be reached
        raise AssertionError("purchase must not run")

    def refuse(self, call, exc):  # pragma: no cover - must not be reached
        raise AssertionError("refuse must not run")


def _no_keys() -> KeySet:
    raise NotConfigured("STOREFRONT_SIGNING_KEY is not set")


class _Services:
    """What the endpoints use of `shared.runtime.Services`."""

    def __init__(self, receipts=None, keys=_no_keys, ledger=None, downloads=None):
        self.storefront = _Store(receipts or _Receipts())
        self.keys = keys
        self.ledger = ledger
        self.downloads = downloads


def get_receipt(services: _Services, receipt_id: str, accept: str | None = None):
    headers = {} if accept is None else {"accept": accept}
    return receipt(Request("GET", headers, route_params={"receipt_id": receipt_id}), services)


def test_a_stored_receipt_is_served_byte_for_byte():
    receipt_id = new_receipt_id()
    body = b'{\n  "receipt_id": "' + receipt_id.encode() + b'"\n}'
    services = _Services(_Receipts({receipt_id: body}))

    answer = get_receipt(services, receipt_id)

    assert answer.status == 200
    assert answer.body == body
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["Cache-Control"] == "private, max-age=3600"
    assert answer.headers["Vary"] == "Accept"


@pytest.mark.parametrize(
    "receipt_id", ["", "rcpt_x", "../secrets", "rcpt_" + "A" * 26, "rcpt_" + "a" * 26 + "\n"]
)
def test_a_malformed_receipt_id_is_404_without_touching_storage(receipt_id):
    services = _Services(_Receipts())

    answer = get_receipt(services, receipt_id)

    assert answer.status == 404
    assert json.loads(answer.body)["error"]["code"] == "not_found"
    assert services.storefront.receipts.reads == []


def test_an_unknown_receipt_is_404():
    assert get_receipt(_Services(), new_receipt_id()).status == 404


def test_a_receipt_storage_outage_is_503_with_retry_after():
    answer = get_receipt(_Services(_Receipts(down=True)), new_receipt_id())

    assert answer.status == 503
    assert json.loads(answer.body)["error"]["code"] == "store_unavailable"
    assert answer.headers["Retry-After"] == "5"


def test_a_purchase_from_a_foreign_origin_is_403_before_anything_runs():
    req = Request("POST", {"origin": "https://evil.example"}, b'{"email": "a@example.org"}')

    answer = purchase(req, _Store(_Receipts()), Settings())

    assert answer.status == 403
    assert json.loads(answer.body)["error"]["code"] == "forbidden_origin"


# --- receipt pages ---------------------------------------------------------------------------------


KEYS = KeySet.load(
    ec.generate_private_key(ec.SECP256R1())
    .private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    .decode()
)


def _signed_receipt() -> tuple[str, bytes]:
    receipt_id = new_receipt_id()
    content = {"receipt_id": receipt_id, "status": "fulfilled", "checks": [], "billing": {}}
    return receipt_id, encode({**content, "signature": signatures.sign(content, KEYS)})


@pytest.fixture
def page_verdicts(monkeypatch) -> list[signatures.Verdict]:
    """The verdicts the receipt endpoint hands to the page, whatever the page makes of them."""
    seen: list[signatures.Verdict] = []

    def receipt_page(receipt: dict, verdict: signatures.Verdict) -> str:
        seen.append(verdict)
        return "<!doctype html><p>receipt</p>"

    monkeypatch.setattr(api.pages, "receipt_page", receipt_page)
    return seen


def test_a_browser_gets_the_receipt_as_a_page_with_a_valid_signature_verdict(page_verdicts):
    receipt_id, body = _signed_receipt()

    answer = get_receipt(
        _Services(_Receipts({receipt_id: body}), keys=lambda: KEYS), receipt_id, BROWSER_ACCEPT
    )

    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/html")
    assert answer.headers["Vary"] == "Accept"
    assert answer.headers["Cache-Control"] == "private, no-store"
    assert answer.body != body
    assert [v.valid for v in page_verdicts] == [True]
    assert page_verdicts[0].kid == KEYS.kid


def test_a_receipt_page_shows_a_changed_receipt_as_not_verified(page_verdicts):
    receipt_id, body = _signed_receipt()
    changed = body.replace(b'"fulfilled"', b'"refused"')

    answer = get_receipt(
        _Services(_Receipts({receipt_id: changed}), keys=lambda: KEYS), receipt_id, "text/html"
    )

    assert answer.status == 200
    assert [v.valid for v in page_verdicts] == [False]


def test_a_receipt_page_without_a_configured_key_is_not_verified_rather_than_an_error(page_verdicts):
    receipt_id, body = _signed_receipt()

    answer = get_receipt(_Services(_Receipts({receipt_id: body})), receipt_id, "text/html")

    assert answer.status == 200
    assert [v.valid for v in page_verdicts] == [False]
    assert "signing key" in page_verdicts[0].reason


def test_json_clients_get_the_stored_bytes_without_verification(page_verdicts):
    receipt_id, body = _signed_receipt()

    answer = get_receipt(_Services(_Receipts({receipt_id: body})), receipt_id, "application/json")

    assert answer.body == body
    assert page_verdicts == []


def test_a_browser_gets_a_404_page_for_an_unknown_receipt():
    answer = get_receipt(_Services(), new_receipt_id(), BROWSER_ACCEPT)

    assert answer.status == 404
    assert answer.headers["Content-Type"].startswith("text/html")
    assert b"<html" in answer.body.lower()


# --- jwks ------------------------------------------------------------------------------------------


def test_jwks_publishes_the_key_sets_public_keys_for_caching():
    answer = api.jwks(_Services(keys=lambda: KEYS))

    assert answer.status == 200
    assert json.loads(answer.body) == KEYS.jwks()
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["Cache-Control"] == "public, max-age=300"


def test_jwks_is_an_empty_key_list_when_no_signing_key_is_configured():
    answer = api.jwks(_Services())

    assert answer.status == 200
    assert json.loads(answer.body) == {"keys": []}


# --- download --------------------------------------------------------------------------------------


class _Downloads:
    def __init__(self, outcome):
        self.outcome = outcome
        self.tokens: list[str] = []

    def redeem(self, token: str) -> Download:
        self.tokens.append(token)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def download_with(outcome, token: str = "a.b.c", accept: str | None = None):
    downloads = _Downloads(outcome)
    headers = {} if accept is None else {"accept": accept}
    answer = api.download(
        Request("GET", headers, route_params={"token": token}), _Services(downloads=downloads)
    )
    return answer, downloads


def test_a_redeemed_token_answers_the_file_as_an_attachment():
    bundle = find_bundle("agent-starter-kit")

    answer, downloads = download_with(Download(bundle, b"PK\x03\x04zip", "agent-starter-kit.zip"), "x.y.z")

    assert downloads.tokens == ["x.y.z"]
    assert answer.status == 200
    assert answer.body == b"PK\x03\x04zip"
    assert answer.headers["Content-Type"] == "application/zip"
    assert answer.headers["Content-Disposition"] == 'attachment; filename="agent-starter-kit.zip"'
    assert answer.headers["Cache-Control"] == "private, no-store"
    assert answer.headers["X-Content-Type-Options"] == "nosniff"


def test_an_invalid_token_is_401_with_a_bearer_challenge():
    answer, _ = download_with(InvalidToken("the download link has expired"))

    assert answer.status == 401
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="storefront-download", error="invalid_token"'
    assert answer.headers["Cache-Control"] == "no-store"
    assert json.loads(answer.body) == {
        "error": {"code": "invalid_token", "message": "the download link has expired"}
    }


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (Forbidden("not for this bundle"), 403, "forbidden"),
        (BundleUnavailable("not available yet"), 503, "bundle_unavailable"),
    ],
)
def test_other_refusals_keep_their_status_and_carry_no_challenge(error, status, code):
    answer, _ = download_with(error)

    assert answer.status == status
    assert "WWW-Authenticate" not in answer.headers
    assert answer.headers["Cache-Control"] == "no-store"
    assert json.loads(answer.body)["error"]["code"] == code


def test_a_browser_gets_a_refused_download_as_a_page_keeping_status_and_challenge():
    answer, _ = download_with(InvalidToken("the download link has <expired>"), accept=BROWSER_ACCEPT)

    assert answer.status == 401
    assert answer.headers["Content-Type"].startswith("text/html")
    assert answer.headers["WWW-Authenticate"].startswith("Bearer ")
    assert b"&lt;expired&gt;" in answer.body and b"<expired>" not in answer.body


def test_a_missing_token_route_parameter_is_redeemed_as_an_empty_token():
    downloads = _Downloads(InvalidToken("the download link is malformed"))

    answer = api.download(Request("GET", {}), _Services(downloads=downloads))

    assert downloads.tokens == [""]
    assert answer.status == 401


# --- receipts of a day -----------------------------------------------------------------------------


class _Ledger:
    def __init__(self, outcome=None):
        self.outcome = outcome
        self.calls: list[tuple] = []

    def day(self, date: str, *, page_size: int = 50, cursor: str | None = None) -> DayListing:
        self.calls.append((date, page_size, cursor))
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return DayListing(date, [], 0, {}, None)


def day_listing(params: dict, ledger: _Ledger, accept: str | None = None):
    headers = {} if accept is None else {"accept": accept}
    return api.receipts_of_day(Request("GET", headers, params=params), _Services(ledger=ledger), "2026-11-30")


def test_the_day_listing_defaults_to_today_and_pages_of_fifty():
    ledger = _Ledger()

    answer = day_listing({}, ledger)

    assert ledger.calls == [("2026-11-30", 50, None)]
    assert answer.status == 200
    assert json.loads(answer.body) == {
        "date": "2026-11-30",
        "count": 0,
        "totals": {},
        "receipts": [],
        "next_cursor": None,
    }
    assert answer.headers["Cache-Control"] == "private, no-store"


def test_the_day_listing_passes_date_page_size_and_cursor_through():
    ledger = _Ledger()

    day_listing({"date": "2026-01-02", "page_size": "7", "cursor": "abc"}, ledger)

    assert ledger.calls == [("2026-01-02", 7, "abc")]


@pytest.mark.parametrize("page_size", ["ten", "1.5", ""])
def test_a_non_integer_page_size_is_400_without_reading_the_ledger(page_size):
    ledger = _Ledger()

    answer = day_listing({"page_size": page_size}, ledger)

    assert answer.status == 400
    assert json.loads(answer.body)["error"]["code"] == "invalid_page_size"
    assert ledger.calls == []


def test_a_ledger_refusal_keeps_its_status_and_code():
    answer = day_listing({"date": "yesterday"}, _Ledger(InvalidRequest("bad date", code="invalid_date")))

    assert answer.status == 400
    assert json.loads(answer.body) == {"error": {"code": "invalid_date", "message": "bad date"}}


def test_a_ledger_outage_is_503_with_retry_after():
    answer = day_listing({}, _Ledger(StorageOutage("ledger table unavailable: ServiceRequestError")))

    assert answer.status == 503
    assert json.loads(answer.body)["error"]["code"] == "store_unavailable"
    assert answer.headers["Retry-After"] == "5"


def test_a_browser_gets_the_day_listing_as_a_page():
    answer = day_listing({}, _Ledger(), BROWSER_ACCEPT)

    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/html")


# --- bundles ---------------------------------------------------------------------------------------


def test_bundles_answers_the_catalog_listing_as_cacheable_json():
    answer = api.bundles()

    assert answer.status == 200
    assert json.loads(answer.body) == listing()
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["Cache-Control"] == "public, max-age=300"


def test_a_wrong_method_on_bundles_is_405_saying_to_get_it():
    answer = api.wrong_method(Request("POST", {}), api.BUNDLES_USAGE)

    assert answer.status == 405
    assert answer.headers["Allow"] == "GET, HEAD"
    assert json.loads(answer.body)["error"]["message"] == (
        "this endpoint answers GET, HEAD only; GET it for the free bundles and the bundle_id of each"
    )
    assert api.wrong_method(Request("HEAD", {}), api.BUNDLES_USAGE) is None
