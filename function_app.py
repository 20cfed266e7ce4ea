"""Azure Functions entry point (Python v2 model): one function per route, glue only.

Each function turns the `func.HttpRequest` into a plain `shared.protocols.http.Request`, calls the
domain and turns the `Answer` back into a `func.HttpResponse`. The purchase routes (MCP, HTTP,
A2A) answer inside their telemetry span (`shared.seams.telemetry`), which exists only when
Application Insights is configured. An exception that escapes a route or a timer is logged with a
correlation id (`shared.protocols.failures`); a route answers it with a JSON 500 carrying that id,
never an empty body.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from urllib.parse import urlsplit

import azure.functions as func

from shared import runtime
from shared.config.printable import printable
from shared.protocols import agents, api, failures, http
from shared.protocols.a2a import card
from shared.protocols.a2a import endpoint as a2a
from shared.protocols.mcp import endpoint as mcp
from shared.protocols.ucp import endpoint as ucp
from shared.seams import telemetry

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
runtime.settings()  # a malformed setting stops the app at start-up, naming the setting
telemetry.configure()  # only with APPLICATIONINSIGHTS_CONNECTION_STRING; imports nothing without it


def _request(req: func.HttpRequest) -> http.Request:
    return http.Request(
        method=req.method,
        headers={k.lower(): v for k, v in req.headers.items()},
        body=req.get_body() or b"",
        route_params=dict(req.route_params),
        params=dict(req.params),
        url=req.url,
    )


def _response(answer: http.Answer) -> func.HttpResponse:
    return func.HttpResponse(body=answer.body, status_code=answer.status, headers=answer.headers)


def _serve(
    req: func.HttpRequest,
    usage: http.Usage,
    answer: Callable[[http.Request], http.Answer],
    channel: str | None = None,
    *,
    rpc: bool = False,
) -> func.HttpResponse:
    """Answer with `answer`, or 405 for a method the route does not serve; `channel` and `rpc` as
    for `_observed`."""
    return _observed(
        req, lambda request: api.wrong_method(request, usage) or answer(request), channel, rpc=rpc
    )


def _observed(
    req: func.HttpRequest,
    answer: Callable[[http.Request], http.Answer],
    channel: str | None,
    *,
    rpc: bool = False,
) -> func.HttpResponse:
    """Answer with `answer`; a purchase route (`channel` one of `shared.purchase.call.CHANNELS`)
    inside its telemetry span, current for the whole call so every Brevo and Storage call is
    recorded as its child. Whatever escapes is a JSON 500 with a correlation id (a JSON-RPC error
    where `rpc`), logged."""
    try:
        request = _request(req)
        with telemetry.purchase_span(channel, request.method) as span:
            if channel is None:
                result = answer(request)
            else:  # every purchase door learns which agent signed the request, or refuses it
                addressed = http.as_addressed(request, runtime.settings())
                result = agents.identified(
                    request, runtime.services().agents, answer, rpc=rpc, addressed=addressed
                )
            span.answered(result)
        return _response(result)
    except Exception as exc:
        return _response(failures.unexpected(exc, f"{req.method} {_path(req)}", rpc=rpc))


def _path(req: func.HttpRequest) -> str:
    """The path for the log, as its route template: no query string (it may carry a function key)
    and no route value (a download token is a credential), control characters escaped."""
    try:
        path = urlsplit(req.url).path
    except ValueError:
        return "?"
    for name, value in (req.route_params or {}).items():
        if value:
            path = path.replace(value, f"{{{name}}}")
    return printable(path[:200])


def _scheduled(what: str, work: Callable[[], int], done: str) -> None:
    """Run a timer's work and log `done` with its count. A failure is logged with a correlation id
    and raised again as that id only, so the host records the run as failed without the message."""
    try:
        count = work()
    except Exception as exc:
        correlation_id = failures.log_unexpected(exc, what)
        raise RuntimeError(f"{what} failed unexpectedly, correlation id {correlation_id}") from None
    logging.info(done, count)


# Every route lists every method: Azure answers a method a trigger does not list with an empty 404,
# so the route answers it with 405, Allow and how to call it instead.
@app.route(route="api/a2a/mcp", methods=api.EVERY_METHOD)
def mcp_endpoint(req: func.HttpRequest) -> func.HttpResponse:
    return _observed(
        req, lambda r: mcp.handle(r, runtime.services().storefront, runtime.settings()), "mcp", rpc=True
    )


@app.route(route="api/a2a/purchase", methods=api.EVERY_METHOD)
def purchase(req: func.HttpRequest) -> func.HttpResponse:
    return _serve(
        req,
        api.PURCHASE_USAGE,
        lambda r: api.purchase(r, runtime.services().storefront, runtime.settings()),
        "http",
    )


@app.route(route="api/receipts/{receipt_id}", methods=api.EVERY_METHOD)
def receipt(req: func.HttpRequest) -> func.HttpResponse:
    return _serve(req, api.RECEIPT_USAGE, lambda r: api.receipt(r, runtime.services()))


@app.route(route="api/receipts", methods=api.EVERY_METHOD, auth_level=func.AuthLevel.FUNCTION)
def receipts_of_day(req: func.HttpRequest) -> func.HttpResponse:
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return _serve(req, api.DAY_USAGE, lambda r: api.receipts_of_day(r, runtime.services(), today))


@app.route(route="api/.well-known/jwks.json", methods=api.EVERY_METHOD)
def jwks(req: func.HttpRequest) -> func.HttpResponse:
    return _serve(req, api.JWKS_USAGE, lambda r: api.jwks(runtime.services()))


@app.route(route=".well-known/jwks.json", methods=api.EVERY_METHOD)
def jwks_at_root(req: func.HttpRequest) -> func.HttpResponse:
    """The same keys at the domain root, where agents look for them; receipts name this one."""
    return _serve(req, api.JWKS_USAGE, lambda r: api.jwks(runtime.services()))


@app.route(route="api/bundles", methods=api.EVERY_METHOD)
def bundles(req: func.HttpRequest) -> func.HttpResponse:
    return _serve(req, api.BUNDLES_USAGE, lambda r: api.bundles())


@app.route(route="api/download/{token}", methods=api.EVERY_METHOD)
def download(req: func.HttpRequest) -> func.HttpResponse:
    return _serve(req, api.DOWNLOAD_USAGE, lambda r: api.download(r, runtime.services()))


@app.route(route="api/openapi.json", methods=api.EVERY_METHOD)
def openapi_document(req: func.HttpRequest) -> func.HttpResponse:
    from shared.protocols.openapi import document  # imported on the first request for it, not at cold start

    return _serve(req, document.USAGE, lambda r: document.answer(runtime.settings()))


@app.route(route="api/health", methods=api.EVERY_METHOD)
def health(req: func.HttpRequest) -> func.HttpResponse:
    return _serve(req, api.HEALTH_USAGE, lambda r: api.health(runtime.services()))


@app.route(route=".well-known/agent-card.json", methods=api.EVERY_METHOD)
def agent_card(req: func.HttpRequest) -> func.HttpResponse:
    def answer(r: http.Request) -> http.Answer:
        services = runtime.services()
        return card.agent_card(r, services.settings, services.keys, services.card_dates)

    return _serve(req, card.CARD_USAGE, answer)


@app.route(route=".well-known/ucp", methods=api.EVERY_METHOD)
def ucp_profile(req: func.HttpRequest) -> func.HttpResponse:
    """The UCP business profile, where UCP platforms discover a business."""
    return _serve(req, ucp.PROFILE_USAGE, lambda r: ucp.profile(r, runtime.services()))


@app.route(route="ucp/catalog/{operation}", methods=api.EVERY_METHOD)
def ucp_catalog(req: func.HttpRequest) -> func.HttpResponse:
    """UCP catalog search, lookup and get-product, negotiated with the calling platform."""
    return _serve(req, ucp.ROUTE_USAGE, lambda r: ucp.catalog_request(r, runtime.services()))


@app.route(route="ucp/checkout-sessions", methods=api.EVERY_METHOD)
def ucp_checkouts(req: func.HttpRequest) -> func.HttpResponse:
    """UCP: create a checkout session."""
    return _serve(req, ucp.ROUTE_USAGE, lambda r: ucp.checkout_request(r, runtime.services()))


@app.route(route="ucp/checkout-sessions/{id}", methods=api.EVERY_METHOD)
def ucp_checkout(req: func.HttpRequest) -> func.HttpResponse:
    """UCP: get or update a checkout session."""
    return _serve(req, ucp.ROUTE_USAGE, lambda r: ucp.checkout_request(r, runtime.services()))


@app.route(route="ucp/checkout-sessions/{id}/{action}", methods=api.EVERY_METHOD)
def ucp_checkout_action(req: func.HttpRequest) -> func.HttpResponse:
    """UCP: complete or cancel a checkout session; a complete runs the purchase."""
    completes = (req.route_params.get("action") or "").lower() == "complete"
    return _serve(
        req,
        ucp.ROUTE_USAGE,
        lambda r: ucp.checkout_request(r, runtime.services()),
        "ucp" if completes else None,  # the purchase door: its Web Bot Auth signature is checked
    )


@app.route(route="ucp/mcp", methods=api.EVERY_METHOD)
def ucp_mcp(req: func.HttpRequest) -> func.HttpResponse:
    """UCP's MCP binding: the checkout, order and catalog tools, in both MCP generations."""
    from shared.protocols.mcp.endpoint import serve
    from shared.protocols.ucp import mcp as ucp_mcp_binding

    return _observed(
        req,
        lambda r: serve(r, ucp_mcp_binding.toolset(runtime.services()), runtime.settings()),
        "ucp",  # a door to the purchase (complete_checkout): its Web Bot Auth signature is checked
        rpc=True,
    )


@app.route(route="ucp/orders/{id}", methods=api.EVERY_METHOD)
def ucp_order(req: func.HttpRequest) -> func.HttpResponse:
    """UCP: get an order, for the platform whose checkout it was (its request signed)."""
    return _serve(req, ucp.ROUTE_USAGE, lambda r: ucp.order_request(r, runtime.services()))


@app.route(route="api/a2a", methods=api.EVERY_METHOD)
def a2a_endpoint(req: func.HttpRequest) -> func.HttpResponse:
    return _serve(
        req,
        a2a.ENDPOINT_USAGE,
        lambda r: a2a.handle(r, runtime.services().storefront, runtime.settings()),
        "a2a" if a2a.sends(req.get_body() or b"") else None,  # reading a task buys nothing
        rpc=True,
    )


# Every other path, with every method Azure lets a trigger list: a JSON 404 naming the endpoints
# instead of the host's empty one. The Functions host tries routes in the order of their
# functions' names, ignoring case, the first match serving (not the literal-first precedence of
# ASP.NET), so this one's name must sort after every other HTTP function's.
@app.function_name("zz_unknown_route")
@app.route(route="{*path}", methods=api.EVERY_METHOD)
def unknown_route(req: func.HttpRequest) -> func.HttpResponse:
    return _observed(req, api.unknown_route, None)


@app.timer_trigger(schedule="0 */15 * * * *", arg_name="timer", run_on_startup=False)
def reap_idempotency_keys(timer: func.TimerRequest) -> None:
    """Every 15 minutes: delete idempotency claims past their expiry, and the UCP checkout
    sessions and Idempotency-Key answers past theirs."""

    def reap() -> int:
        services = runtime.services()
        keys = services.storefront.reap_expired_keys()  # first: the one the purchase needs
        return keys + (services.checkouts.reap() if services.checkouts else 0)

    _scheduled("reap_idempotency_keys", reap, "reaped %d expired idempotency keys and checkout sessions")


@app.timer_trigger(schedule="*/10 * * * * *", arg_name="timer", run_on_startup=False)
def drain_contacts(timer: func.TimerRequest) -> None:
    """Every 10 seconds: make the queued buyers Brevo contacts, inside Brevo's contacts limit
    (one instance at a time, whatever the host runs)."""
    _scheduled(
        "drain_contacts",
        lambda: runtime.services().drainer.run().handed,
        "handed %d queued contacts to Brevo",
    )


@app.timer_trigger(schedule="0 * * * * *", arg_name="timer", run_on_startup=False)
def deliver_order_webhooks(timer: func.TimerRequest) -> None:
    """Every minute: send the UCP order events that are due, retrying those that failed."""

    def deliver() -> int:
        webhooks = runtime.services().webhooks
        return webhooks.deliver_due() if webhooks else 0

    _scheduled("deliver_order_webhooks", deliver, "delivered %d order events")


@app.timer_trigger(schedule="0 */5 * * * *", arg_name="timer", run_on_startup=False)
def repair_receipts(timer: func.TimerRequest) -> None:
    """Every 5 minutes: put on record the receipts answered while Blob or Table was down."""
    _scheduled(
        "repair_receipts",
        lambda: runtime.services().storefront.repair_receipts(),
        "put %d receipts on record",
    )
