"""One error tree for the storefront; each class maps to one HTTP status and one JSON-RPC code.

    StorefrontError                      500  -32603  (never raised for user input)
    ├── InvalidRequest                   400  -32602  malformed body, wrong types, unknown fields
    │   └── InvalidIdempotencyKey        400  -32602  key breaks ^[A-Za-z0-9._-]{8,128}$
    ├── InvalidToken                     401  -32000  a download token that is not the store's, or expired
    ├── Forbidden                        403  -32000  a valid token for another audience or bundle
    ├── KeyInUse                         409  -32000  the key's first request is still running
    ├── PayloadTooLarge                  413  -32600
    ├── Unprocessable                    422  -32602  invalid email, unknown bundle
    │   └── KeyReused                    422  -32602  the key was used with a different request
    ├── LimitExceeded                    429  -32000  rate limit, daily cost ceiling (carries retry_after)
    ├── UpstreamError                    502  -32000  Brevo answered with an error
    │   └── UpstreamUnavailable          503  -32000  Brevo timed out, unreachable, 5xx or 429
    ├── NotConfigured                    503  -32000  a production secret is missing
    ├── ReceiptUnavailable               503  -32000  a completed key's receipt cannot be read
    ├── StorageDown                      503  -32000  a keyed purchase cannot be protected or recorded now
    ├── BundleUnavailable                503  -32000  the bundle's file is not in storage
    └── ProtocolError                    4xx  JSON-RPC code given per instance (MCP transport errors,
                                              with the error's `data` where the revision defines one)

`StoreUnavailable` is separate on purpose: it never reaches a caller. Storage adapters raise it for
outages; the flow then decides: a keyed purchase fails closed (`StorageDown`, 503 + Retry-After),
the governance counters and unkeyed purchases fail open and mark the check `degraded`.
"""

from __future__ import annotations


class StorefrontError(Exception):
    status = 500
    rpc_code = -32603
    code = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.retry_after = retry_after


class InvalidRequest(StorefrontError):
    status = 400
    rpc_code = -32602
    code = "invalid_request"


class InvalidIdempotencyKey(InvalidRequest):
    code = "invalid_idempotency_key"


class InvalidToken(StorefrontError):
    status = 401
    rpc_code = -32000
    code = "invalid_token"


class Forbidden(StorefrontError):
    status = 403
    rpc_code = -32000
    code = "forbidden"


class KeyInUse(StorefrontError):
    status = 409
    rpc_code = -32000
    code = "idempotency_key_in_use"


class PayloadTooLarge(StorefrontError):
    status = 413
    rpc_code = -32600
    code = "payload_too_large"


class Unprocessable(StorefrontError):
    status = 422
    rpc_code = -32602
    code = "unprocessable"


class KeyReused(Unprocessable):
    code = "idempotency_key_reused"


class LimitExceeded(StorefrontError):
    status = 429
    rpc_code = -32000
    code = "limit_exceeded"


class UpstreamError(StorefrontError):
    status = 502
    rpc_code = -32000
    code = "upstream_error"
    upstream_code = ""


class UpstreamUnavailable(UpstreamError):
    status = 503
    code = "upstream_unavailable"


class NotConfigured(StorefrontError):
    status = 503
    rpc_code = -32000
    code = "not_configured"


class ReceiptUnavailable(StorefrontError):
    status = 503
    rpc_code = -32000
    code = "receipt_unavailable"


class StorageDown(StorefrontError):
    status = 503
    rpc_code = -32000
    code = "store_unavailable"


class BundleUnavailable(StorefrontError):
    status = 503
    rpc_code = -32000
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


class StoreUnavailable(Exception):
    """Table or Blob storage could not be reached or answered with a server error."""
