"""What every protocol adapter (HTTP, MCP, A2A) shares of a request and its answer: the plain
`Request` and `Answer` records, JSON, error and HTML answers, the body rules (size, Content-Type,
JSON depth and Unicode), the Origin allowlist, who called, and how a route is called (`Usage`).

`function_app.py` converts to and from `azure.functions` types and nothing else, so these rules
live and are tested here; `shared.protocols.api` holds the HTTP endpoints built on them.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit, urlunsplit

from shared.config.errors import InvalidRequest, PayloadTooLarge, StorefrontError, UnsupportedMediaType
from shared.config.printable import printable
from shared.config.settings import Settings
from shared.protocols.client_address import client_address
from shared.purchase.agent import Agent
from shared.purchase.call import Caller, PurchaseCall

MAX_BODY_BYTES = 64 * 1024
# Far below the interpreter's recursion limit, which later code (hashing, storing and sending the
# arguments) would otherwise reach with a body that parsed just under it.
MAX_JSON_DEPTH = 64
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
JSON_TYPE = "application/json"
_DAY, _MONTH = "(Mon|Tue|Wed|Thu|Fri|Sat|Sun)", "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TIME = r"\d\d:\d\d:\d\d"
# RFC 9110 §5.6.7's three forms of HTTP-date: IMF-fixdate, then the obsolete RFC 850 and asctime.
HTTP_DATE = re.compile(
    rf"{_DAY}, \d\d {_MONTH} \d{{4}} {_TIME} GMT"
    rf"|(Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day, \d\d-{_MONTH}-\d\d {_TIME} GMT"
    rf"|{_DAY} {_MONTH} [ \d]\d {_TIME} \d{{4}}"
)


@dataclass(frozen=True)
class Request:
    method: str
    headers: Mapping[str, str]
    body: bytes = b""
    route_params: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    url: str = ""  # as the host received it: a signature's @authority is checked against it
    agent: Agent | None = None  # the Web Bot Auth agent that signed it (shared.protocols.agents)
    proven_platform: str | None = (
        None  # a UCP platform a transport around it proved (its MCP POST's signature)
    )

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def wants_html(self) -> bool:
        """True when the client prefers HTML to JSON (a browser); JSON is the default."""
        return _quality(self.header("accept"), "text/html") > _quality(self.header("accept"), JSON_TYPE)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """How a route is called: the methods it serves (HEAD is served as GET) and, for a caller who
    used another one, how to call it instead."""

    allow: tuple[str, ...]
    how: str


# A name longer than this is no typo of a route or a tool, and is never compared: difflib's cost
# grows with the length of what it compares.
MAX_GUESSED = 256


def nearest(given: str, known: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The one of `known` that `given` most likely misspells (case aside), for a "did you mean";
    None when none is close. A route's 404 and an unknown MCP tool both name it."""
    if len(given) > MAX_GUESSED:
        return None
    by_lower = {name.lower(): name for name in known}
    near = difflib.get_close_matches(given.lower(), by_lower, n=1, cutoff=cutoff)
    return by_lower[near[0]] if near else None


def shown(given: str, limit: int = 64) -> str:
    """At most `limit` characters of a caller's text, escaped (`printable`), to quote in an error:
    enough to recognise a typo, never a way to make the answer long or to write to a terminal."""
    return printable(given[:limit]) + ("..." if len(given) > limit else "")


def http_date(value: str | None) -> datetime | None:
    """A valid HTTP-date as a UTC datetime; None for anything else (a list, a zone other than
    GMT, a date that does not exist), which a conditional request then ignores."""
    if value is None or not HTTP_DATE.fullmatch(value.strip()):
        return None
    try:
        return parsedate_to_datetime(value.strip()).replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        return None


def not_modified(req: Request, etag: str, modified: datetime | None) -> bool:
    """Whether a GET or HEAD is answered 304 (RFC 9110 §13.2.2): If-None-Match when it is sent (a
    weak comparison); only without it, If-Modified-Since, when it is a valid HTTP-date and the
    representation has a date (`modified`, whole seconds) no later than it."""
    if_none_match = req.header("if-none-match")
    if if_none_match is not None:
        wanted = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return etag.removeprefix("W/") in wanted or "*" in wanted
    since = http_date(req.header("if-modified-since"))
    return modified is not None and since is not None and modified <= since


def json_answer(status: int, payload: object, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, json.dumps(payload).encode(), {"Content-Type": JSON_TYPE, **(headers or {})})


def error_answer(exc: StorefrontError, headers: dict[str, str] | None = None, **extra: object) -> Answer:
    """An error of the tree as JSON, `{"error": {"code", "message", ...extra}}`, with the status
    its class gives it (shared/config/errors.py) and Retry-After when it carries one."""
    if exc.retry_after is not None:
        headers = {"Retry-After": str(exc.retry_after), **(headers or {})}
    return json_answer(exc.status, {"error": {"code": exc.code, "message": exc.message, **extra}}, headers)


HTML_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def html_answer(status: int, page: str, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, page.encode(), {**HTML_HEADERS, "Vary": "Accept", **(headers or {})})


def _quality(accept: str | None, media_type: str) -> float:
    """The q-value `accept` gives `media_type` (exact match, then type/*, then */*)."""
    if not accept:
        return 1.0 if media_type == JSON_TYPE else 0.0
    kind = media_type.split("/")[0] + "/*"
    best: dict[str, float] = {}
    for part in accept.split(","):
        name, *options = (piece.strip() for piece in part.split(";"))
        q = 1.0
        for option in options:
            if option.lower().startswith("q="):
                try:
                    q = min(max(float(option[2:]), 0.0), 1.0)
                except ValueError:
                    q = 0.0
                if q != q:  # NaN
                    q = 0.0
        best[name.lower()] = max(q, best.get(name.lower(), 0.0))
    for candidate in (media_type, kind, "*/*"):
        if candidate in best:
            return best[candidate]
    return 0.0


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
    """Who called, as the receipt records it: the User-Agent with control and format characters
    escaped, so the signed receipt, its page and a terminal show what was sent, inert; and the
    agent whose Web Bot Auth signature was verified, if any."""
    return Caller(channel, printable(req.header("user-agent") or "")[:200], req.agent)


def purchase_call(req: Request, channel: str, arguments: object, settings: Settings) -> PurchaseCall:
    """The purchase as the flow sees it, whichever endpoint was called: the arguments, the
    Idempotency-Key header, the client's address (behind the proxies the settings trust) and
    the caller."""
    return PurchaseCall(
        arguments=arguments,
        header_key=req.header("idempotency-key"),
        client_ip=client_address(
            req.header, hops=settings.trusted_proxy_hops, front_door_id=settings.front_door_id
        ),
        caller=caller(req, channel),
    )


def as_addressed(req: Request, settings: Settings) -> Request:
    """The request with the URL its sender addressed, which a signature's `@authority` covers: on
    Azure, where Front Door or a custom domain may stand before the app and the app may see the
    platform's host name instead, the scheme and authority of STOREFRONT_PUBLIC_BASE_URL; off Azure,
    the URL as received (the tests call hosts at their own addresses)."""
    if not settings.hosted_on_azure or not settings.public_base_url:
        return req
    public, received = urlsplit(settings.public_base_url), urlsplit(req.url)
    return replace(req, url=urlunsplit((public.scheme, public.netloc, received.path, received.query, "")))


def check_json_declared(req: Request) -> None:
    """The Content-Type rule of every POST route (the purchase, MCP and A2A): a body declared as
    `application/json`, with any parameters (`; charset=utf-8`), or as a `+json` type is read;
    one declared as anything else (a form, text) is refused with UnsupportedMediaType (415)
    before it is read. No Content-Type, or an empty one, is read as JSON: scripts send none, and
    what a web page can send without one is refused by its Origin."""
    declared = (req.header("content-type") or "").split(";")[0].strip().lower()
    if declared and declared != JSON_TYPE and not declared.endswith("+json"):
        raise UnsupportedMediaType(
            f"Content-Type {declared[:60]!r} is not supported: send the body as JSON, "
            f"with Content-Type: {JSON_TYPE}"
        )


class JSONTooDeep(ValueError):
    """The document's arrays and objects nest deeper than MAX_JSON_DEPTH."""

    def __init__(self) -> None:
        super().__init__(f"arrays and objects nest more than {MAX_JSON_DEPTH} levels deep")


def parse_json(body: bytes) -> object:
    """JSON nested at most MAX_JSON_DEPTH levels whose strings are all valid Unicode: escapes such
    as \\ud800 (a lone surrogate) parse in Python but cannot be hashed, stored or sent on, so they
    are refused here (ValueError; JSONTooDeep for the nesting)."""
    try:
        parsed = json.loads(body)
    except RecursionError:
        raise JSONTooDeep() from None
    if _nesting(parsed) > MAX_JSON_DEPTH:
        raise JSONTooDeep()
    try:
        json.dumps(parsed, ensure_ascii=False).encode()
    except UnicodeError as exc:
        raise ValueError(str(exc)) from None
    return parsed


def _nesting(document: object) -> int:
    """How many levels deep arrays and objects nest (a scalar is 0), counted without recursion and
    no further than one level past MAX_JSON_DEPTH."""
    deepest, pending = 0, [(document, 1)]
    while pending and deepest <= MAX_JSON_DEPTH:
        value, depth = pending.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            pending.extend((child, depth + 1) for child in value)
    return deepest


def parse_body(body: bytes) -> object:
    if len(body) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"request body exceeds {MAX_BODY_BYTES} bytes")
    try:
        return parse_json(body)
    except JSONTooDeep as exc:
        raise InvalidRequest(f"request body refused: {exc}", code="invalid_json") from None
    except ValueError:
        raise InvalidRequest("request body is not valid JSON", code="invalid_json") from None
