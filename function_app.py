"""Azure Functions entry point (Python v2 model): one function per route, glue only.

Each function turns the `func.HttpRequest` into a plain `shared.api.Request`, calls the domain
and turns the `Answer` back into a `func.HttpResponse`.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import azure.functions as func

from shared import api, mcp, runtime

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
runtime.settings()  # a malformed setting stops the app at start-up, naming the setting


def _request(req: func.HttpRequest) -> api.Request:
    return api.Request(
        method=req.method,
        headers={k.lower(): v for k, v in req.headers.items()},
        body=req.get_body() or b"",
        route_params=dict(req.route_params),
        params=dict(req.params),
    )


def _response(answer: api.Answer) -> func.HttpResponse:
    return func.HttpResponse(body=answer.body, status_code=answer.status, headers=answer.headers)


@app.route(route="a2a/mcp", methods=["POST", "GET", "DELETE"])
def mcp_endpoint(req: func.HttpRequest) -> func.HttpResponse:
    return _response(mcp.handle(_request(req), runtime.services().storefront, runtime.settings()))


@app.route(route="a2a/purchase", methods=["POST"])
def purchase(req: func.HttpRequest) -> func.HttpResponse:
    return _response(api.purchase(_request(req), runtime.services().storefront, runtime.settings()))


@app.route(route="receipts/{receipt_id}", methods=["GET"])
def receipt(req: func.HttpRequest) -> func.HttpResponse:
    return _response(api.receipt(_request(req), runtime.services()))


@app.route(route="receipts", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def receipts_of_day(req: func.HttpRequest) -> func.HttpResponse:
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return _response(api.receipts_of_day(_request(req), runtime.services(), today))


@app.route(route=".well-known/jwks.json", methods=["GET"])
def jwks(req: func.HttpRequest) -> func.HttpResponse:
    return _response(api.jwks(runtime.services()))


@app.route(route="download/{token}", methods=["GET"])
def download(req: func.HttpRequest) -> func.HttpResponse:
    return _response(api.download(_request(req), runtime.services()))


@app.route(route="health", methods=["GET"])
def health(req: func.HttpRequest) -> func.HttpResponse:
    return _response(api.health(runtime.services()))


@app.timer_trigger(schedule="0 */15 * * * *", arg_name="timer", run_on_startup=False)
def reap_idempotency_keys(timer: func.TimerRequest) -> None:
    """Every 15 minutes: delete idempotency claims past their expiry."""
    removed = runtime.services().storefront.reap_expired_keys()
    logging.info("reaped %d expired idempotency keys", removed)
