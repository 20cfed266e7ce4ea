"""The sandbox app: routes a parsed request to its handler and answers with a response. On Brevo's
paths it checks the api-key, then storms, the rate limit and injected faults, in that order, and
puts the family's rate-limit headers on every answer; it refuses its own controls (``control``)
to other sites, and knows nothing about sockets.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from email.message import Message
from typing import Any

from devstack.brevo_sandbox.contacts import parse_contact_request
from devstack.brevo_sandbox.control import SAFE_METHODS, Controls, Handler, refuse_other_sites
from devstack.brevo_sandbox.email_log import parse_log_query, transactional_log
from devstack.brevo_sandbox.emails import parse_email_request
from devstack.brevo_sandbox.faults import RATE_LIMIT_HEADERS
from devstack.brevo_sandbox.imports import IMPORT_MAX_BYTES, parse_import_request, too_large
from devstack.brevo_sandbox.limits import (
    DEFAULT_TIER,
    REMAINING_HEADER,
    RateLimiter,
    family_of,
    too_many_requests,
)
from devstack.brevo_sandbox.state import SandboxState
from devstack.brevo_sandbox.wire import (
    BREVO_PATHS,
    ApiError,
    Request,
    Response,
    json_response,
    parse_json_object,
)

UNAUTHORIZED = {"code": "unauthorized", "message": "Key not found"}


def _error(err: ApiError) -> Response:
    body: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.metadata is not None:
        body["metadata"] = err.metadata
    response = json_response(err.status, body)
    response.headers.update(err.headers)
    return response


def _with_limits(response: Response, headers: dict[str, str]) -> Response:
    """The family's rate-limit headers under the answer's own (a fault's win)."""
    response.headers = {**headers, **response.headers}
    return response


class SandboxApp:
    """Maps a parsed Request to a Response; knows nothing about sockets."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        tier: str = DEFAULT_TIER,
        limits: Mapping[str, str | None] | None = None,
    ) -> None:
        """*tier*: general, advanced or extended; *limits*: per family (email, contacts,
        smtp_other, other) ``"N/s"``, ``"N/h"`` or ``"off"`` in place of the tier's. A bad value
        raises ValueError."""
        self.state = SandboxState()
        self.limiter = RateLimiter(tier, limits)
        self.api_key = api_key
        routes: list[tuple[str, dict[str, Handler]]] = [
            ("/v3/contacts", {"POST": self._create_contact}),
            ("/v3/contacts/import", {"POST": self._import_contacts}),
            (r"/v3/processes/([0-9]{1,12})", {"GET": self._process}),
            ("/v3/smtp/email", {"POST": self._send_email}),
            ("/v3/smtp/emails", {"GET": self._email_log}),
            *Controls(self.state, self.limiter).routes(),
        ]
        self._routes = [(re.compile(pattern), methods) for pattern, methods in routes]

    def handle(self, req: Request) -> Response:
        if req.path.startswith("/v3/"):
            return self._handle_brevo(req)
        try:
            if req.method not in SAFE_METHODS:
                refuse_other_sites(req.headers)
            handler, match = self._resolve(req.method, req.path)
            return handler(req, match)
        except ApiError as err:
            return _error(err)

    def refuse(self, method: str, path: str, err: ApiError) -> Response:
        """The answer to a request the HTTP layer refused before reading it (say, a body too big);
        on Brevo's paths it carries the rate-limit headers but does not count."""
        response = _error(err)
        if path.startswith("/v3/"):
            _with_limits(response, self.limiter.peek(family_of(method, path)))
        return response

    def _handle_brevo(self, req: Request) -> Response:
        family = family_of(req.method, req.path)
        if req.path in BREVO_PATHS:
            self.state.count_request(req.path)
        try:
            self._authenticate(req.headers)
        except ApiError as err:  # no account to count the request against
            return _with_limits(_error(err), self.limiter.peek(family))
        stormed = self._storm(family)
        if stormed is not None:
            return stormed
        decision = self.limiter.take(family)
        if not decision.allowed:
            return _with_limits(json_response(429, too_many_requests(family)), decision.headers)
        try:
            handler, match = self._resolve(req.method, req.path)
            faulted = self._apply_fault(req, decision.headers)
            response = faulted if faulted is not None else handler(req, match)
        except ApiError as err:
            response = _error(err)
        return _with_limits(response, decision.headers)

    def _storm(self, family: str) -> Response | None:
        """A storm's 429, counted as the family's refusal; None when no storm is blowing."""
        taken = self.state.faults.take_storm(family)
        if taken is None:
            return None
        storm, seconds_left = taken
        response = json_response(429, storm.body)
        limits = self.limiter.refuse(family, seconds_left)
        response.headers.update({**RATE_LIMIT_HEADERS, **limits, **storm.headers})
        return response

    def _authenticate(self, headers: Message) -> None:
        key = headers.get("api-key")
        if not key or (self.api_key is not None and key != self.api_key):
            raise ApiError(401, UNAUTHORIZED["code"], UNAUTHORIZED["message"])

    def _resolve(self, method: str, path: str) -> tuple[Handler, re.Match[str]]:
        for pattern, methods in self._routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if method not in methods:
                allow = {"Allow": ", ".join(sorted(methods))}
                raise ApiError(405, "method_not_allowed", f"{method} is not allowed on {path}", allow)
            return methods[method], match
        raise ApiError(404, "not_found", f"No route for {path}")

    def _apply_fault(self, req: Request, limits: dict[str, str]) -> Response | None:
        """Sleep and/or fail as an injected fault says; None means carry on normally. A 429 says
        the family has nothing left, unless the fault's own headers say otherwise."""
        matched = req.body or "&".join(f"{k}={v}" for k, vs in req.query.items() for v in vs).encode()
        fault = self.state.faults.take(req.path, matched)
        if fault is None:
            return None
        if fault.delay_seconds:
            time.sleep(fault.delay_seconds)
        if not fault.status:
            return None
        response = json_response(fault.status, fault.body)
        if fault.status == 429:
            response.headers.update({**RATE_LIMIT_HEADERS, **limits, REMAINING_HEADER: "0"})
        response.headers.update(fault.headers)
        return response

    def _create_contact(self, req: Request, _: re.Match[str]) -> Response:
        request = parse_contact_request(parse_json_object(req.body))
        contact_id = self.state.upsert_contact(request)
        if contact_id is None:
            return Response(204)
        return json_response(201, {"id": contact_id})

    def _import_contacts(self, req: Request, _: re.Match[str]) -> Response:
        if len(req.body) > IMPORT_MAX_BYTES:
            raise too_large()
        process_id = self.state.import_contacts(parse_import_request(parse_json_object(req.body)))
        return json_response(202, {"processId": process_id})

    def _process(self, req: Request, match: re.Match[str]) -> Response:
        process = self.state.process(int(match.group(1)))
        if process is None:
            raise ApiError(404, "document_not_found", "Process does not exist")
        return json_response(200, process.brevo_view())

    def _send_email(self, req: Request, _: re.Match[str]) -> Response:
        email = self.state.capture_email(parse_email_request(parse_json_object(req.body)))
        return json_response(201, {"messageId": email.messageId})

    def _email_log(self, req: Request, _: re.Match[str]) -> Response:
        query = parse_log_query(req.query, datetime.now(timezone.utc).date())
        return json_response(200, transactional_log(self.state.emails(), query))
