"""The HTTP endpoints as plain functions: a `Request` in, an `Answer` out.

`function_app.py` converts to and from `azure.functions` types and nothing else, so every rule of
the HTTP surface (origin allowlist, body limits, status codes, headers) lives and is tested here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from shared import __version__
from shared.errors import InvalidRequest, PayloadTooLarge, StorefrontError, StoreUnavailable
from shared.governance import client_ip
from shared.purchase import Caller, Outcome, PurchaseCall, Storefront
from shared.receipts import is_receipt_id
from shared.settings import Settings

MAX_BODY_BYTES = 64 * 1024
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
JSON_TYPE = "application/json"


@dataclass(frozen=True)
class Request:
    method: str
    headers: Mapping[str, str]
    body: bytes = b""
    route_params: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def json_answer(status: int, payload: object, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, json.dumps(payload).encode(), {"Content-Type": JSON_TYPE, **(headers or {})})


def error_answer(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Answer:
    return json_answer(status, {"error": {"code": code, "message": message}}, headers)


def origin_allowed(origin: str | None, extra_hosts: tuple[str, ...]) -> bool:
    """Absent Origin (non-browser clients) passes; a present one must name an allowed host."""
    if origin is None:
        return True
    try:
        host = urlsplit(origin.strip()).hostname
    except ValueError:
        return False
    return bool(host) and (host in LOCAL_HOSTS or host in extra_hosts)


def caller(req: Request, channel: str) -> Caller:
    return Caller(channel, (req.header("user-agent") or "")[:200])


def outcome_answer(outcome: Outcome) -> Answer:
    headers = {"Content-Type": JSON_TYPE}
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    if outcome.retry_after is not None:
        headers["Retry-After"] = str(outcome.retry_after)
    return Answer(outcome.status, outcome.body, headers)


def purchase(req: Request, store: Storefront, settings: Settings) -> Answer:
    if not origin_allowed(req.header("origin"), settings.allowed_origins):
        return error_answer(403, "forbidden_origin", "requests from this Origin are not allowed")
    call = PurchaseCall(
        arguments=None,
        header_key=req.header("idempotency-key"),
        client_ip=client_ip(req.header("x-forwarded-for")),
        caller=caller(req, "http"),
    )
    try:
        arguments = parse_body(req.body)
    except StorefrontError as exc:
        return outcome_answer(store.refuse(call, exc))
    return outcome_answer(store.purchase(replace(call, arguments=arguments)))


def parse_body(body: bytes) -> object:
    if len(body) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"request body exceeds {MAX_BODY_BYTES} bytes")
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise InvalidRequest("request body is not valid JSON", code="invalid_json") from None


def receipt(req: Request, store: Storefront) -> Answer:
    receipt_id = req.route_params.get("receipt_id", "")
    if not is_receipt_id(receipt_id):
        return error_answer(404, "not_found", "no receipt with this id")
    try:
        body = store.receipts.read(receipt_id)
    except StoreUnavailable:
        return error_answer(503, "store_unavailable", "receipt storage is unreachable", {"Retry-After": "5"})
    if body is None:
        return error_answer(404, "not_found", "no receipt with this id")
    return Answer(200, body, {"Content-Type": JSON_TYPE, "Cache-Control": "private, max-age=3600"})


def health(settings: Settings) -> Answer:
    return json_answer(
        200,
        {
            "status": "ok" if not settings.missing_secrets else "unconfigured",
            "version": __version__,
            "missing_settings": list(settings.missing_secrets),
        },
        {"Cache-Control": "no-store"},
    )
