"""One error tree for the storefront: each class answers one HTTP status, and every code a
caller can meet is in docs/errors.md with its status and an example cause.

The rule a refusal follows, on every endpoint:

    400  the request's shape is wrong: not JSON, not an object, a required field missing, an
         unknown field, a wrong type, a string too long or too short, a key off its pattern:
         whatever the published JSON Schema (the tool's inputSchema, the OpenAPI document) says,
         but for bundle_id's enum, which lists the catalog of the day
    422  a well-formed request is refused for a value: an email that is not an address, a bundle
         the store does not have, a name refused as a link, a key used for another request
    404 nothing here, 405 a method the route does not serve, 413 too large, 415 a body not
         declared as JSON: HTTP's own

MCP and A2A answer a refused purchase with the receipt the HTTP endpoint answers, its
`error.code` the same, inside a tool result (`isError`) or a rejected or failed task: the status
below is what `POST /api/a2a/purchase` answers for that code. JSON-RPC error codes belong to
the envelope and transport only (`ProtocolError`), each with the status its spec gives it.

    StorefrontError                      500  never raised for user input
    ├── InvalidRequest                   400  the request's shape (invalid_request, invalid_json, ...)
    │   └── InvalidIdempotencyKey        400  a key off ^[A-Za-z0-9._-]{8,128}$
    ├── InvalidToken                     401  a download token that is not the store's, or expired
    ├── Forbidden                        403  a valid token for another audience or bundle; an Origin
    ├── NotFound                         404  no receipt with this id; no endpoint at this path
    ├── MethodNotAllowed                 405  a method the route does not serve
    ├── KeyInUse                         409  the key's first request is still running
    ├── PayloadTooLarge                  413  a body over 64 KiB
    ├── UnsupportedMediaType             415  a body declared as something other than JSON
    ├── Unprocessable                    422  a well-formed value refused (invalid_email, unknown_bundle, ...)
    │   └── KeyReused                    422  the key was used with a different request
    ├── LimitExceeded                    429  rate limit, recipient limit, cost ceiling (carries retry_after)
    ├── UpstreamError                    502  Brevo answered with an error
    │   └── UpstreamUnavailable          503  Brevo timed out, unreachable, 5xx, 429, or 402 (quota)
    ├── NotConfigured                    503  a production secret is missing
    ├── ReceiptUnavailable               503  a completed key's receipt cannot be read
    ├── StoreUnavailable                 503  storage cannot protect, record or read this now
    ├── BundleUnavailable                503  the bundle's file is not in storage
    └── ProtocolError                    4xx  an MCP or A2A envelope or transport error, with its
                                              own status and JSON-RPC code (and the error's `data`
                                              where the revision defines one)

`StorageOutage` is separate on purpose: it never reaches a caller. Storage adapters raise it for
outages; the flow then decides: a keyed purchase fails closed (`StoreUnavailable`, code
`store_unavailable`, 503 + Retry-After), the governance counters and unkeyed purchases fail open
and mark the check `degraded`.
"""

from __future__ import annotations


class StorefrontError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.retry_after = retry_after


class InvalidRequest(StorefrontError):
    status = 400
    code = "invalid_request"


class InvalidIdempotencyKey(InvalidRequest):
    code = "invalid_idempotency_key"


class InvalidToken(StorefrontError):
    status = 401
    code = "invalid_token"


class Forbidden(StorefrontError):
    status = 403
    code = "forbidden"


class NotFound(StorefrontError):
    status = 404
    code = "not_found"


class MethodNotAllowed(StorefrontError):
    status = 405
    code = "method_not_allowed"


class KeyInUse(StorefrontError):
    status = 409
    code = "idempotency_key_in_use"


class PayloadTooLarge(StorefrontError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(StorefrontError):
    status = 415
    code = "unsupported_media_type"


class Unprocessable(StorefrontError):
    status = 422
    code = "unprocessable"


class KeyReused(Unprocessable):
    code = "idempotency_key_reused"


class LimitExceeded(StorefrontError):
    status = 429
    code = "limit_exceeded"


class UpstreamError(StorefrontError):
    status = 502
    code = "upstream_error"
    upstream_code = ""
    upstream_status = 0  # Brevo's HTTP status; 0 when it did not answer
    not_sent = False  # Brevo refused the call outright, so nothing went out
    pace: object = None  # the rate-limit headers of Brevo's answer (shared.seams.brevo.Pace)


class UpstreamUnavailable(UpstreamError):
    status = 503
    code = "upstream_unavailable"


class NotConfigured(StorefrontError):
    status = 503
    code = "not_configured"


class ReceiptUnavailable(StorefrontError):
    status = 503
    code = "receipt_unavailable"


class StoreUnavailable(StorefrontError):
    status = 503
    code = "store_unavailable"


class BundleUnavailable(StorefrontError):
    status = 503
    code = "bundle_unavailable"


class ProtocolError(StorefrontError):
    """A JSON-RPC / transport-level error of the MCP or A2A endpoint, with its own status and code;
    `data` is the error's data where the revision defines one, `field` the params path at fault."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        rpc_code: int,
        request_id: object = None,
        data: object = None,
        field: str | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message, code="protocol_error", retry_after=retry_after)
        self.status = status
        self.rpc_code = rpc_code
        self.request_id = request_id
        self.data = data
        self.field = field


class StorageOutage(Exception):
    """Table or Blob storage could not be reached or answered with a server error."""
