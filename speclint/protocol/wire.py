"""A live server as the protocol revisions see it: one JSON-RPC request at a time over stdio or
Streamable HTTP, and the ways an answer can fail. How a failure is classed decides whether a
``server/discover`` probe falls back to ``initialize`` (``speclint.protocol.negotiate``):

    Unreadable          the target cannot be read (speclint.load); a failure of its own:
                        no server reached, the whole exchange out of time
    ├── Refused         a JSON-RPC error, or an HTTP error status standing for one
    ├── Garbled         an answer that is not the JSON-RPC response asked for
    ├── TimedOut        no answer within the request's own wait (a probe's), time remaining
    └── Ended           the server exited or closed its output before answering (stdio)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from speclint.findings import __version__
from speclint.load import Unreadable

CLIENT_INFO = {"name": "speclint", "version": __version__}
METHOD_NOT_FOUND = -32601  # the JSON-RPC error code


class Refused(Unreadable):
    """The server answered with a JSON-RPC error (`code` None when an HTTP status stood for one)."""

    def __init__(self, message: str, code: int | None = None, data: object = None):
        super().__init__(message)
        self.code = code
        self.data = data

    @classmethod
    def carrying(cls, message: str, error: object) -> Refused:
        """Refused with the code and data of a JSON-RPC error object, whatever its shape."""
        if not isinstance(error, dict):
            return cls(message)
        code = error.get("code")
        return cls(
            message, code if isinstance(code, int) and not isinstance(code, bool) else None, error.get("data")
        )


class Garbled(Unreadable):
    """The answer is not a JSON-RPC response to the request, or carries no result object."""


class TimedOut(Unreadable):
    """The request's own wait ran out with time left in the exchange."""


class Ended(Unreadable):
    """The server ended before answering `method`."""

    def __init__(self, message: str, method: str):
        super().__init__(message)
        self.method = method


class Wire(Protocol):
    """One transport's side of the exchange; `headers` matter to Streamable HTTP only."""

    name: str
    timeout: float

    def request(
        self, method: str, params: dict, headers: Mapping[str, str], wait: float | None = None
    ) -> dict:
        """The result object of one request, answered within `wait` seconds if given."""
        ...

    def notify(self, method: str, headers: Mapping[str, str]) -> None: ...
