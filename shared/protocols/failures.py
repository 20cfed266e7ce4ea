"""The last line of defence: what a route answers, and what the log keeps, when an exception
escapes everything that should have caught it.

The caller gets a JSON 500 (a JSON-RPC error on the JSON-RPC endpoints) carrying a correlation id,
never an empty body; the log gets one line with the same id, the exception's type and where it was
raised. The exception's message is left out of both: it may quote an email, a header or a secret.
"""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from pathlib import Path

from shared.protocols.http import JSON_TYPE, Answer

log = logging.getLogger(__name__)
CORRELATION_HEADER = "X-Correlation-Id"
MESSAGE = "the store failed unexpectedly; quote the correlation id if you report it"
JSONRPC_INTERNAL_ERROR = -32603
_FRAMES = 8
_ROOT = Path(__file__).resolve().parents[2]


def new_correlation_id() -> str:
    return uuid.uuid4().hex


def log_unexpected(exc: BaseException, where: str) -> str:
    """Log `exc` by type and place under a new correlation id, which is returned."""
    correlation_id = new_correlation_id()
    log.error(
        "unexpected %s in %s, correlation id %s, raised at %s",
        type(exc).__qualname__,
        where,
        correlation_id,
        raised_at(exc),
    )
    return correlation_id


def raised_at(exc: BaseException) -> str:
    """The innermost frames of `exc`'s traceback as `file:line in function`, innermost last."""
    frames = traceback.extract_tb(exc.__traceback__)[-_FRAMES:]
    return " < ".join(f"{_relative(f.filename)}:{f.lineno} in {f.name}" for f in reversed(frames)) or "?"


def _relative(filename: str) -> str:
    try:
        return str(Path(filename).resolve().relative_to(_ROOT))
    except ValueError:
        return Path(filename).name


def unexpected(exc: BaseException, where: str, *, rpc: bool = False) -> Answer:
    """The 500 for an exception nothing else caught, logged under the id it carries."""
    correlation_id = log_unexpected(exc, where)
    if rpc:
        data = {"correlation_id": correlation_id}
        error = {"code": JSONRPC_INTERNAL_ERROR, "message": MESSAGE, "data": data}
        payload: dict = {"jsonrpc": "2.0", "id": None, "error": error}
    else:
        payload = {"error": {"code": "internal_error", "message": MESSAGE, "correlation_id": correlation_id}}
    headers = {"Content-Type": JSON_TYPE, "Cache-Control": "no-store", CORRELATION_HEADER: correlation_id}
    return Answer(500, json.dumps(payload).encode(), headers)
