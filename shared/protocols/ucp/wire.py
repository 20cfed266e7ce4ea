"""The shapes every UCP answer takes (UCP 2026-08-25): a protocol error is an HTTP status with
`{code, content}` (shopping/checkout/rest.md "Error Responses"), Retry-After on 429 and 503."""

from __future__ import annotations

from shared.protocols.http import Answer, json_answer


def protocol_error(status: int, code: str, content: str, retry_after: int | None = None) -> Answer:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return json_answer(status, {"code": code, "content": content}, headers)
