"""One error tree for the storefront: each class answers one HTTP status, and every code a
caller can meet is in docs/errors.md with its status and an example cause.

A request's shape is refused with 400 (`InvalidRequest`), a well-formed value with 422
(`Unprocessable`), alike on HTTP, MCP and A2A; `ProtocolError` is a JSON-RPC envelope or transport
error with its own status. `StorageOutage` stands apart: it never reaches a caller.

docs/errors.md#the-rule has the rule, and docs/errors.md#the-error-tree draws the tree.
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


class SignatureRefused(StorefrontError):
    """A Web Bot Auth signature was sent and could not be accepted (docs/agents.md)."""

    status = 401
    code = "invalid_signature"


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
