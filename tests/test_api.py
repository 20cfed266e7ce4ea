"""shared.api: the HTTP surface as plain functions (origin allowlist, body parsing, health and
receipt answers), called directly without a host."""

from __future__ import annotations

import json

import pytest

from shared import __version__
from shared.api import (
    MAX_BODY_BYTES,
    Request,
    error_answer,
    health,
    json_answer,
    origin_allowed,
    parse_body,
    purchase,
    receipt,
)
from shared.errors import InvalidRequest, PayloadTooLarge, StoreUnavailable
from shared.receipts import new_receipt_id
from shared.settings import SECRET_SETTINGS, Settings

# --- origin_allowed --------------------------------------------------------------------------------


def test_absent_origin_is_allowed():
    assert origin_allowed(None, ())


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost",
        "http://localhost:3000",
        "https://localhost:8443",
        "http://LOCALHOST:5173",
        "http://127.0.0.1",
        "http://127.0.0.1:7071",
        "https://127.0.0.1:1",
        "http://[::1]",
        "http://[::1]:8080",
        "https://[::1]:65535",
        "  http://localhost:3000  ",
        "vscode-webview://localhost",
    ],
)
def test_loopback_origins_on_any_port_and_scheme_are_allowed(origin):
    assert origin_allowed(origin, ())


@pytest.mark.parametrize(
    "origin", ["https://app.example.net", "https://APP.Example.NET", "http://app.example.net:8080"]
)
def test_a_configured_host_is_allowed(origin):
    assert origin_allowed(origin, ("app.example.net",))


@pytest.mark.parametrize(
    "origin",
    [
        pytest.param("null", id="null"),
        pytest.param("https://evil.example", id="foreign"),
        pytest.param("http://localhost.evil.example", id="localhost-prefix"),
        pytest.param("http://evil-localhost", id="localhost-suffix"),
        pytest.param("http://127.0.0.1.evil.example", id="loopback-prefix"),
        pytest.param("http://127.0.0.2", id="other-loopback"),
        pytest.param("http://0.0.0.0", id="any-address"),
        pytest.param("http://[::2]", id="other-ipv6"),
        pytest.param("http://localhost@evil.example", id="userinfo"),
        pytest.param("https://app.example.net.evil.example", id="configured-prefix"),
        pytest.param("https://evil.app.example.net", id="configured-subdomain"),
        pytest.param("https://evilapp.example.net", id="configured-suffix"),
        pytest.param("https://app.example", id="configured-truncated"),
    ],
)
def test_foreign_and_look_alike_origins_are_refused(origin):
    assert not origin_allowed(origin, ("app.example.net",))


@pytest.mark.parametrize(
    "origin",
    [
        "",
        "   ",
        "localhost",
        "localhost:3000",
        "http://",
        "http://[::1",
        "http://[localhost]",
        "file://",
        "%%%",
    ],
)
def test_garbage_origins_are_refused(origin):
    assert not origin_allowed(origin, ())


def test_configured_hosts_are_needed_for_anything_but_loopback():
    assert not origin_allowed("https://app.example.net", ())


# --- parse_body ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"email": "a@example.org"}', {"email": "a@example.org"}),
        (b"[1, 2]", [1, 2]),
        (b"null", None),
        ('{"name": "Zoë"}'.encode(), {"name": "Zoë"}),
        ('{"name": "Zoë"}'.encode("utf-16"), {"name": "Zoë"}),
    ],
    ids=["object", "array", "null", "utf8", "utf16"],
)
def test_any_json_document_is_parsed(body, expected):
    assert parse_body(body) == expected


def test_a_body_of_exactly_the_limit_is_parsed():
    body = json.dumps({"name": ""}).encode()
    body = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + body[-1:]
    assert len(body) == MAX_BODY_BYTES

    assert parse_body(body) == {"name": ""}


def test_a_body_over_the_limit_is_payload_too_large():
    with pytest.raises(PayloadTooLarge) as caught:
        parse_body(b" " * MAX_BODY_BYTES + b"{}")

    assert caught.value.status == 413
    assert caught.value.code == "payload_too_large"
    assert str(MAX_BODY_BYTES) in caught.value.message


@pytest.mark.parametrize(
    "body",
    [b"", b"   ", b"not json", b"{", b'{"email": }', b"\xff\xfe\xfa", b"\x80abc", b"{'a': 1}", b"[1,]"],
    ids=[
        "empty",
        "blank",
        "text",
        "truncated",
        "missing-value",
        "binary",
        "bad-utf8",
        "single-quotes",
        "comma",
    ],
)
def test_a_body_that_is_not_json_is_invalid_json(body):
    with pytest.raises(InvalidRequest) as caught:
        parse_body(body)

    assert caught.value.status == 400
    assert caught.value.code == "invalid_json"


def test_deeply_nested_json_under_the_size_limit_is_invalid_json_not_a_crash():
    body = b"[" * 30_000 + b"]" * 30_000
    assert len(body) <= MAX_BODY_BYTES

    with pytest.raises(InvalidRequest) as caught:
        parse_body(body)

    assert caught.value.code == "invalid_json"


# --- answers ---------------------------------------------------------------------------------------


def test_health_is_ok_when_every_secret_is_set():
    answer = health(Settings())

    assert answer.status == 200
    assert json.loads(answer.body) == {"status": "ok", "version": __version__, "missing_settings": []}
    assert answer.headers == {"Content-Type": "application/json", "Cache-Control": "no-store"}


def test_health_is_unconfigured_and_names_the_missing_settings():
    answer = health(Settings(missing_secrets=SECRET_SETTINGS))

    assert answer.status == 200
    assert json.loads(answer.body) == {
        "status": "unconfigured",
        "version": __version__,
        "missing_settings": ["BREVO_API_KEY", "STOREFRONT_SIGNING_KEY", "STOREFRONT_HASH_SECRET"],
    }


def test_health_never_reveals_secret_values():
    settings = Settings.from_env(
        {"BREVO_API_KEY": "xkeysib-secret", "STOREFRONT_HASH_SECRET": "hash-secret-value"}
    )

    body = health(settings).body.decode()

    assert "xkeysib-secret" not in body and "hash-secret-value" not in body
    assert json.loads(body)["missing_settings"] == ["STOREFRONT_SIGNING_KEY"]


def test_error_answer_is_a_json_error_object_with_extra_headers():
    answer = error_answer(404, "not_found", "nothing here", {"Retry-After": "5"})

    assert answer.status == 404
    assert json.loads(answer.body) == {"error": {"code": "not_found", "message": "nothing here"}}
    assert answer.headers == {"Content-Type": "application/json", "Retry-After": "5"}


def test_json_answer_content_type_is_json():
    assert json_answer(201, [1]).headers["Content-Type"] == "application/json"


def test_request_header_lookup_is_by_lower_case_name():
    req = Request("POST", {"idempotency-key": "k"})

    assert req.header("Idempotency-Key") == "k"
    assert req.header("Origin") is None


# --- receipt and purchase endpoints with a stub store ----------------------------------------------


class _Receipts:
    def __init__(self, stored: dict[str, bytes] | None = None, down: bool = False):
        self.stored = stored or {}
        self.down = down
        self.reads: list[str] = []

    def read(self, receipt_id: str) -> bytes | None:
        self.reads.append(receipt_id)
        if self.down:
            raise StoreUnavailable("blob storage unavailable: ServiceRequestError")
        return self.stored.get(receipt_id)


class _Store:
    def __init__(self, receipts: _Receipts):
        self.receipts = receipts

    def purchase(self, call):  # pragma: no cover - must not be reached
        raise AssertionError("purchase must not run")

    def refuse(self, call, exc):  # pragma: no cover - must not be reached
        raise AssertionError("refuse must not run")


def get_receipt(store: _Store, receipt_id: str):
    return receipt(Request("GET", {}, route_params={"receipt_id": receipt_id}), store)


def test_a_stored_receipt_is_served_byte_for_byte():
    receipt_id = new_receipt_id()
    body = b'{\n  "receipt_id": "' + receipt_id.encode() + b'"\n}'
    store = _Store(_Receipts({receipt_id: body}))

    answer = get_receipt(store, receipt_id)

    assert answer.status == 200
    assert answer.body == body
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["Cache-Control"] == "private, max-age=3600"


@pytest.mark.parametrize(
    "receipt_id", ["", "rcpt_x", "../secrets", "rcpt_" + "A" * 26, "rcpt_" + "a" * 26 + "\n"]
)
def test_a_malformed_receipt_id_is_404_without_touching_storage(receipt_id):
    store = _Store(_Receipts())

    answer = get_receipt(store, receipt_id)

    assert answer.status == 404
    assert json.loads(answer.body)["error"]["code"] == "not_found"
    assert store.receipts.reads == []


def test_an_unknown_receipt_is_404():
    assert get_receipt(_Store(_Receipts()), new_receipt_id()).status == 404


def test_a_receipt_storage_outage_is_503_with_retry_after():
    answer = get_receipt(_Store(_Receipts(down=True)), new_receipt_id())

    assert answer.status == 503
    assert json.loads(answer.body)["error"]["code"] == "store_unavailable"
    assert answer.headers["Retry-After"] == "5"


def test_a_purchase_from_a_foreign_origin_is_403_before_anything_runs():
    req = Request("POST", {"origin": "https://evil.example"}, b'{"email": "a@example.org"}')

    answer = purchase(req, _Store(_Receipts()), Settings())

    assert answer.status == 403
    assert json.loads(answer.body)["error"]["code"] == "forbidden_origin"
