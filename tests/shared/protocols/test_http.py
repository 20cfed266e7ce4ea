"""shared.protocols.http: what every protocol adapter shares of a request and its answer (origin allowlist,
body parsing, JSON and error answers, content negotiation), called directly without a host."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from shared.config.errors import InvalidRequest, NotFound, PayloadTooLarge, StoreUnavailable
from shared.protocols.http import (
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    Request,
    _quality,
    error_answer,
    http_date,
    json_answer,
    not_modified,
    origin_allowed,
    parse_body,
)

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


@pytest.mark.parametrize("opener", ["[", '{"a":'], ids=["arrays", "objects"])
def test_json_nested_64_levels_is_parsed_and_65_is_invalid_json_saying_why(opener):
    closer = "]" if opener == "[" else "}"

    def nested(depth: int) -> bytes:
        return (opener * depth + "0" + closer * depth).encode()

    assert parse_body(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(InvalidRequest) as caught:
        parse_body(nested(MAX_JSON_DEPTH + 1))

    assert MAX_JSON_DEPTH == 64
    assert caught.value.code == "invalid_json"
    assert caught.value.message == "request body refused: arrays and objects nest more than 64 levels deep"


def test_a_wide_shallow_document_is_parsed():
    body = json.dumps({"a": [[1, 2]] * 5000, "b": {"c": [{"d": []}]}}).encode()

    assert parse_body(body)["b"] == {"c": [{"d": []}]}


# --- answers ---------------------------------------------------------------------------------------


def test_error_answer_is_a_json_error_object_with_its_class_status_and_extra_headers():
    answer = error_answer(NotFound("nothing here"), {"Cache-Control": "no-store"})

    assert answer.status == 404
    assert json.loads(answer.body) == {"error": {"code": "not_found", "message": "nothing here"}}
    assert answer.headers == {"Content-Type": "application/json", "Cache-Control": "no-store"}


def test_error_answer_carries_the_errors_code_retry_after_and_extra_fields():
    answer = error_answer(StoreUnavailable("down", retry_after=5), hint="later")

    assert answer.status == 503
    assert json.loads(answer.body) == {
        "error": {"code": "store_unavailable", "message": "down", "hint": "later"}
    }
    assert answer.headers["Retry-After"] == "5"


def test_json_answer_content_type_is_json():
    assert json_answer(201, [1]).headers["Content-Type"] == "application/json"


def test_request_header_lookup_is_by_lower_case_name():
    req = Request("POST", {"idempotency-key": "k"})

    assert req.header("Idempotency-Key") == "k"
    assert req.header("Origin") is None


# --- content negotiation ---------------------------------------------------------------------------

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


def accepting(accept: str | None) -> Request:
    return Request("GET", {} if accept is None else {"accept": accept})


@pytest.mark.parametrize(
    "accept",
    [
        pytest.param(BROWSER_ACCEPT, id="browser"),
        pytest.param("text/html", id="html"),
        pytest.param("TEXT/HTML", id="upper-case"),
        pytest.param("text/*", id="text-wildcard"),
        pytest.param("application/json;q=0.5, text/html", id="json-weighted-lower"),
        pytest.param("text/html ; q=0.4 , application/json ; q=0.3", id="spaces-around-parameters"),
        pytest.param("text/html, */*;q=0.1", id="html-over-wildcard"),
    ],
)
def test_a_client_preferring_html_wants_html(accept):
    assert accepting(accept).wants_html()


@pytest.mark.parametrize(
    "accept",
    [
        pytest.param(None, id="missing"),
        pytest.param("", id="empty"),
        pytest.param("application/json", id="json"),
        pytest.param("*/*", id="anything"),
        pytest.param("application/*", id="application-wildcard"),
        pytest.param("application/json, text/html", id="tie-goes-to-json"),
        pytest.param("text/html;q=0.5, application/json", id="html-weighted-lower"),
        pytest.param("text/html;q=0", id="html-refused"),
        pytest.param("text/html;q=0, */*", id="html-refused-anything-else-accepted"),
        pytest.param("text/html;q=abc", id="unreadable-q"),
        pytest.param("application/json, text/event-stream", id="mcp-client"),
        pytest.param("text/html;level=1;q=0.1, application/json;q=0.2", id="q-after-another-parameter"),
    ],
)
def test_api_clients_and_missing_accept_get_json(accept):
    assert not accepting(accept).wants_html()


@pytest.mark.parametrize(
    ("accept", "media_type", "q"),
    [
        (None, "application/json", 1.0),
        (None, "text/html", 0.0),
        ("text/html;q=0.7", "text/html", 0.7),
        ("text/*;q=0.3", "text/html", 0.3),
        ("text/html;q=0.7, text/*;q=0.3, */*;q=0.1", "text/html", 0.7),
        ("text/html;q=0.7, text/*;q=0.3, */*;q=0.1", "text/plain", 0.3),
        ("text/html;q=0.7, text/*;q=0.3, */*;q=0.1", "application/json", 0.1),
        ("text/html;q=0, */*", "text/html", 0.0),
        ("image/png", "application/json", 0.0),
        ("text/html;q=0.2, text/html;q=0.6", "text/html", 0.6),
    ],
)
def test_quality_takes_the_most_specific_match(accept, media_type, q):
    assert _quality(accept, media_type) == q


def test_an_upper_case_q_parameter_is_honoured():
    assert not accepting("text/html;Q=0.1, application/json;q=0.5").wants_html()


@pytest.mark.parametrize(
    ("on_azure", "received", "addressed"),
    [
        (
            True,
            "http://func-shop.azurewebsites.net/ucp/orders/ord_a?x=1",
            "https://shop.example/ucp/orders/ord_a?x=1",
        ),
        (True, "https://shop.example:8443/api/a2a", "https://shop.example/api/a2a"),
        (False, "http://127.0.0.1:17071/ucp/orders/ord_a", "http://127.0.0.1:17071/ucp/orders/ord_a"),
    ],
)
def test_a_signature_is_checked_against_the_url_its_sender_addressed(on_azure, received, addressed):
    """Behind Front Door or a custom domain the app may see another host than the one a signer's
    @authority covers: on Azure, the public base URL's scheme and authority are the ones signed."""
    from dataclasses import replace as with_fields

    from shared.config.settings import Settings
    from shared.protocols.http import Request, as_addressed

    settings = with_fields(Settings(), hosted_on_azure=on_azure, public_base_url="https://shop.example")
    req = Request("GET", {}, b"", {}, {}, received)

    assert as_addressed(req, settings).url == addressed


# --- conditional requests ----------------------------------------------------------------------------

NOV_6 = datetime(1994, 11, 6, 8, 49, 37, tzinfo=timezone.utc)
TAG = 'W/"abc"'


@pytest.mark.parametrize(
    "value",
    ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"],
    ids=["imf-fixdate", "rfc850", "asctime"],
)
def test_every_form_of_http_date_is_read_as_utc(value):
    assert http_date(value) == NOV_6


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "yesterday",
        "Sun, 06 Nov 1994 08:49:37 +0200",  # only GMT
        "06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",  # a list
        "Sun, 31 Feb 1994 08:49:37 GMT",  # no such day
        "1994-11-06T08:49:37Z",
    ],
)
def test_anything_but_one_http_date_is_no_date(value):
    assert http_date(value) is None


def conditional(**headers: str) -> Request:
    return Request("GET", {name.replace("_", "-"): value for name, value in headers.items()})


@pytest.mark.parametrize(
    ("since", "expected"),
    [("Sun, 06 Nov 1994 08:49:37 GMT", True), ("Sun, 06 Nov 1994 08:49:38 GMT", True)]
    + [("Sun, 06 Nov 1994 08:49:36 GMT", False), ("not a date", False)],
    ids=["same-second", "later", "earlier", "invalid"],
)
def test_if_modified_since_is_not_modified_when_the_date_is_no_later(since, expected):
    assert not_modified(conditional(if_modified_since=since), TAG, NOV_6) is expected


def test_if_modified_since_means_nothing_when_the_representation_has_no_date():
    assert not not_modified(conditional(if_modified_since="Sun, 06 Nov 1994 08:49:37 GMT"), TAG, None)


@pytest.mark.parametrize(("tags", "expected"), [('"other"', False), ('"abc"', True), ("*", True)])
def test_if_none_match_decides_alone_when_sent(tags, expected):
    """RFC 9110 §13.2.2: If-Modified-Since is evaluated only when If-None-Match is absent."""
    both = conditional(if_none_match=tags, if_modified_since="Sun, 06 Nov 1994 08:49:37 GMT")

    assert not_modified(both, TAG, NOV_6) is expected
