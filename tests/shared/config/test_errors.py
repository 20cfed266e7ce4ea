"""shared/config/errors.py and docs/errors.md: one rule for every refusal (400 for a request's shape, 422
for a well-formed value refused), the same on HTTP, MCP and A2A; 415 for a body not declared JSON
on every POST route; a JSON 404 naming the endpoints for an unknown path. The page's tables are
held against the code: every code the app can answer is listed with its one status, and nothing
else is."""

from __future__ import annotations

import ast
import json
import re
import uuid

import pytest
import requests

from shared.config.errors import ProtocolError, StorefrontError
from shared.protocols import api
from tests.support import ROOT, UNKNOWN_BUNDLE_ID, Buyer, json_answers_of, unique_email, unique_key

PAGE = ROOT / "docs" / "errors.md"
SOURCES = [ROOT / "function_app.py", *sorted((ROOT / "shared").rglob("*.py"))]


def _subclasses(cls: type) -> list[type]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _subclasses(child))]


def _section(start: str, end: str | None = None) -> str:
    text = PAGE.read_text().split(start, 1)[1]
    return text.split(end, 1)[0] if end else text


def documented_codes() -> dict[str, int]:
    """The page's table of error codes: code to status."""
    rows = re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", _section("## Error codes", "## JSON-RPC"), re.M)
    assert len(rows) == len(dict(rows)), "a code listed twice"
    return {code: int(status) for code, status in rows}


def documented_rpc_codes() -> set[int]:
    return {int(code) for code in re.findall(r"^\| `(-\d+)` \|", _section("## JSON-RPC error codes"), re.M)}


def _literal(node: ast.expr, where: str) -> str:
    assert isinstance(node, ast.Constant) and isinstance(node.value, str), (
        f"{where}: an error code must be a string literal, for docs/errors.md's test to see it"
    )
    return node.value


def emitted_codes() -> dict[str, set[int | None]]:
    """Every error code the app's source can answer, with the statuses it goes with: the code of
    every error of the tree constructed (its class's, or the `code=` given), and every `"code"`
    of a JSON error body built by hand (status None: the page says)."""
    classes = {cls.__name__: cls for cls in _subclasses(StorefrontError) if cls is not ProtocolError}
    found: dict[str, set[int | None]] = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            name = (
                getattr(node.func, "id", getattr(node.func, "attr", None))
                if isinstance(node, ast.Call)
                else None
            )
            if name in classes:
                given = [_literal(k.value, where) for k in node.keywords if k.arg == "code"]
                code = given[0] if given else classes[name].code
                found.setdefault(code, set()).add(classes[name].status)
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if getattr(key, "value", None) == "code" and isinstance(
                        getattr(value, "value", None), str
                    ):
                        found.setdefault(value.value, set()).add(None)
    return found


def emitted_rpc_codes() -> set[int]:
    """Every JSON-RPC error code in the app's source (a literal from -32768 to -32000)."""
    found = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
                value = getattr(node.operand, "value", None)
                if type(value) is int and 32000 <= value <= 32768:
                    found.add(-value)
    return found


# --- the page and the tree hold the code ------------------------------------------------------------


def test_every_code_the_app_can_answer_is_on_the_page_and_nothing_else_is():
    emitted, documented = emitted_codes(), documented_codes()

    assert sorted(emitted.keys() - documented.keys()) == [], "answered but not on docs/errors.md"
    assert sorted(documented.keys() - emitted.keys()) == [], "on docs/errors.md but never answered"


def test_each_code_goes_with_one_status_the_one_the_page_gives():
    documented = documented_codes()

    statuses = {code: found - {None} for code, found in emitted_codes().items()}

    assert {code: found for code, found in statuses.items() if len(found) > 1} == {}
    given = {code: min(found) for code, found in statuses.items() if found}
    assert given == {code: documented[code] for code in given}


def test_every_json_rpc_code_the_endpoints_can_answer_is_on_the_page_and_nothing_else_is():
    assert sorted(emitted_rpc_codes()) == sorted(documented_rpc_codes())


def test_the_page_gives_422_to_the_refused_values_alone():
    assert {code for code, status in documented_codes().items() if status == 422} == {
        "invalid_email",
        "invalid_name",
        "unknown_bundle",
        "idempotency_key_reused",
    }


def test_the_error_trees_drawing_gives_every_class_and_its_status():
    drawing = _section("## The error tree", "## Error codes").split("```text\n", 1)[1].split("```", 1)[0]
    drawn = dict(re.findall(r"(?:^|── )(\w+)\s+(\d{3}|4xx)\s", drawing, re.M))

    assert drawn == {
        cls.__name__: "4xx" if cls is ProtocolError else str(cls.status)
        for cls in _subclasses(StorefrontError)
    }


# --- the issue's examples, on all three protocols --------------------------------------------------


@pytest.fixture(scope="module")
def shop(host_factory):
    """A host of its own: the docs snippet calls from 127.0.0.1, whose quota on the shared hosts'
    governance table must stay untouched."""
    return host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="1000", STOREFRONT_GOVERNANCE_TABLE="governanceerrors")


def a2a_send(buyer: Buyer, data: dict, headers: dict | None = None, **post) -> requests.Response:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"data": data}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return buyer.http.post(
        f"{buyer.host}/api/a2a",
        data=json.dumps(body).encode(),
        headers={"A2A-Version": "1.0", "Content-Type": "application/json", **(headers or {})},
        timeout=30,
        **post,
    )


def mcp_call(buyer: Buyer, arguments: dict, headers: dict | None = None) -> requests.Response:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "purchase_free_bundle", "arguments": arguments},
    }
    return buyer.post_raw(
        "/api/a2a/mcp", json.dumps(message).encode(), {"Content-Type": "application/json", **(headers or {})}
    )


ISSUE_TABLE = [
    pytest.param({}, 400, "invalid_request", id="missing-email"),
    pytest.param({"email": "not-an-email"}, 422, "invalid_email", id="bad-email"),
    pytest.param({"email": "{email}", "coupon": "FREE"}, 400, "invalid_request", id="unknown-field"),
    pytest.param(
        {"email": "{email}", "bundle_id": UNKNOWN_BUNDLE_ID}, 422, "unknown_bundle", id="unknown-bundle"
    ),
    pytest.param({"email": "{email}", "name": "n" * 101}, 400, "invalid_request", id="name-too-long"),
    pytest.param({"email": "{email}", "name": "www.example.org"}, 422, "invalid_name", id="name-refused"),
]


@pytest.mark.parametrize(("payload", "status", "code"), ISSUE_TABLE)
def test_each_example_of_the_rule_is_refused_alike_over_http_mcp_and_a2a(shop, mail, payload, status, code):
    buyer = Buyer(shop.url)
    arguments = {k: buyer.email if v == "{email}" else v for k, v in payload.items()}

    http = buyer.purchase(arguments)
    mcp = mcp_call(buyer, arguments).json()["result"]
    task = a2a_send(buyer, arguments).json()["result"]["task"]

    assert (http.status_code, http.json()["error"]["code"]) == (status, code)
    assert (mcp["isError"], mcp["structuredContent"]["error"]["code"]) == (True, code)
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert task["artifacts"][0]["parts"][0]["data"]["error"]["code"] == code
    assert documented_codes()[code] == status
    assert mail.emails_to(buyer.email) == []


def test_a_malformed_request_reusing_a_key_is_told_its_shape_before_the_key(shop, mail):
    buyer = Buyer(shop.url)
    key = unique_key()
    first = buyer.purchase({"email": buyer.email, "idempotency_key": key})

    malformed = buyer.purchase({"email": buyer.email, "idempotency_key": key, "coupon": "FREE"})
    malformed_mcp = mcp_call(buyer, {"email": buyer.email, "idempotency_key": key, "name": 7}).json()[
        "result"
    ]
    other = buyer.purchase({"email": buyer.email, "idempotency_key": key, "name": "Someone Else"})

    assert first.status_code == 200
    assert (malformed.status_code, malformed.json()["error"]["code"]) == (400, "invalid_request")
    checks = {c["name"]: c["result"] for c in malformed.json()["checks"]}
    assert (checks["idempotency"], checks["input_schema"]) == ("fail", "fail")
    assert malformed_mcp["structuredContent"]["error"]["code"] == "invalid_request"
    assert (other.status_code, other.json()["error"]["code"]) == (422, "idempotency_key_reused")
    assert len(mail.emails_to(buyer.email)) == 1


# --- 415: a body not declared as JSON ----------------------------------------------------------------

NOT_JSON = [
    "application/x-www-form-urlencoded",
    "text/plain",
    "text/plain; charset=utf-8",
    "multipart/form-data",
]


@pytest.mark.parametrize("content_type", NOT_JSON)
def test_a_body_not_declared_json_is_415_naming_application_json_on_every_post_route(
    shop, mail, content_type
):
    buyer = Buyer(shop.url)
    header = {"Content-Type": content_type}
    body = json.dumps({"email": buyer.email}).encode()

    http = buyer.post_raw("/api/a2a/purchase", body, header)
    mcp = mcp_call(buyer, {"email": buyer.email}, header)
    a2a = a2a_send(buyer, {"email": buyer.email}, header)

    declared = content_type.split(";")[0]
    assert [answer.status_code for answer in (http, mcp, a2a)] == [415, 415, 415]
    assert [answer.headers["Content-Type"] for answer in (http, mcp, a2a)] == ["application/json"] * 3
    receipt = http.json()
    assert (receipt["status"], receipt["error"]["code"]) == ("refused", "unsupported_media_type")
    assert receipt["error"]["message"] == (
        f"Content-Type {declared!r} is not supported: send the body as JSON, "
        "with Content-Type: application/json"
    )
    assert (mcp.json()["error"]["code"], mcp.json()["error"]["message"]) == (
        -32600,
        receipt["error"]["message"],
    )
    assert (a2a.json()["error"]["code"], a2a.json()["error"]["message"]) == (
        -32005,
        receipt["error"]["message"],
    )
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "",
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.api+json",
    ],
)
def test_json_with_parameters_a_json_suffix_or_no_content_type_is_read_on_every_post_route(
    shop, content_type
):
    buyer = Buyer(shop.url)
    header = {} if content_type is None else {"Content-Type": content_type}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    http = buyer.post_raw("/api/a2a/purchase", b'{"email": "not-an-email"}', header)
    mcp = buyer.post_raw("/api/a2a/mcp", json.dumps(listing).encode(), header)
    a2a = a2a_send(buyer, {"operation": "list_bundles"}, header)

    assert (http.status_code, http.json()["error"]["code"]) == (422, "invalid_email")
    assert mcp.status_code == 200 and mcp.json()["result"]["tools"]
    assert a2a.status_code == 200 and a2a.json()["result"]["message"]["parts"]


# --- 404: an unknown path ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/purchase"),
        ("POST", "/api/purchase"),
        ("POST", "/api/nope"),
        ("DELETE", "/api/a2a/purchase/extra"),
        ("GET", "/"),
        ("PUT", "/.well-known/nothing.json"),
        ("OPTIONS", "/api"),
    ],
)
def test_an_unknown_path_is_a_json_404_listing_the_endpoints(shop, method, path):
    answer = requests.request(method, f"{shop.url}{path}", data=b"email=ada", timeout=10)

    assert answer.status_code == 404
    assert answer.headers["Content-Type"] == "application/json"
    error = answer.json()["error"]
    assert error["code"] == "not_found"
    assert error["endpoints"] == list(api.ENDPOINTS)
    assert (error["openapi"], error["docs"]) == ("/api/openapi.json", "README.md#endpoints")
    assert error["message"].startswith("no endpoint at this path; ")
    assert error["message"].endswith("described by the OpenAPI document at /api/openapi.json")


@pytest.mark.parametrize(
    ("path", "near"),
    [
        ("/api/purchase", "POST /api/a2a/purchase"),
        ("/api/bundle", "GET /api/bundles"),
        ("/api/helth", "GET /api/health"),
        ("/API/Receipts/rcpt_x/extra", None),
        ("/api/zzzzzz", None),
    ],
)
def test_a_404_names_the_endpoint_a_near_miss_was_meant_for(shop, path, near):
    message = requests.get(f"{shop.url}{path}", timeout=10).json()["error"]["message"]

    hint = re.search(r"did you mean (.+?)\? ", message)
    assert (hint[1] if hint else None) == near


def test_the_pages_404_example_is_what_get_api_purchase_answers(shop):
    (example,) = re.findall(r"^```json\n(.*?)^```", _section("### Unknown paths"), re.M | re.S)
    shown = json.loads(example)["error"]

    error = requests.get(f"{shop.url}/api/purchase", timeout=10).json()["error"]

    assert shown["endpoints"] == [*api.ENDPOINTS[:2], "..."]
    assert {**shown, "endpoints": error["endpoints"]} == error


def test_a_head_of_an_unknown_path_is_a_404_without_a_body(shop):
    answer = requests.head(f"{shop.url}/api/nope", timeout=10)

    assert (answer.status_code, answer.content) == (404, b"")


def test_every_listed_endpoint_answers_rather_than_404(shop):
    concrete = {
        "{receipt_id}": "rcpt_3356oymxvrlcnfepn66by6fqyy",
        "{token}": "a.b.c",
        "YYYY-MM-DD": "2026-11-30",
    }
    for endpoint in api.ENDPOINTS:
        method, path = endpoint.split(" ")
        for placeholder, value in concrete.items():
            path = path.replace(placeholder, value)
        answer = requests.request(method, f"{shop.url}{path}", json={}, timeout=10)
        assert answer.headers.get("Content-Type", "").startswith("application/json")
        error = answer.json().get("error") if answer.status_code == 404 else None
        assert not (isinstance(error, dict) and "endpoints" in error), endpoint


# --- the page's snippet ------------------------------------------------------------------------------


def test_the_curl_snippet_is_refused_415_as_the_page_says_then_buys(shop, mail, tmp_path):
    email = unique_email("curl")
    (block,) = [b for b in re.findall(r"^```sh\n(.*?)^```", PAGE.read_text(), re.M | re.S) if "# 415:" in b]
    code = block.replace("http://localhost:7071", shop.url).replace("ada@example.org", email)

    refused, bought = json_answers_of(code, tmp_path)
    shown = re.search(r"# 415: (.*?)\.\.\.$", code, re.M)[1]
    assert refused["error"]["message"].startswith(shown)
    assert (refused["error"]["code"], bought["status"]) == ("unsupported_media_type", "fulfilled")
    assert len(mail.emails_to(email)) == 1
