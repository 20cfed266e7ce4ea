"""Storage requests counted where the SDK sends them: `RoundTrips` hands storage clients a
transport that records every request (retries included), so the tests and the bench can say how
many round trips a purchase makes, of which kind."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlsplit

from azure.core.pipeline.transport import RequestsTransport


@dataclass(frozen=True)
class Sent:
    """One storage request as the transport sent it, with the entities a table query returned."""

    kind: str
    method: str
    url: str
    body: bytes
    returned: tuple[dict, ...] = ()


class CountingTransport(RequestsTransport):
    """The SDK's own requests transport, counting every request it sends (retries included)."""

    def __init__(self, trips: RoundTrips, kind: str):
        super().__init__()
        self._trips, self._kind = trips, kind

    def send(self, request, **kwargs):
        response = super().send(request, **kwargs)
        returned: tuple[dict, ...] = ()
        if self._kind == "table" and request.method == "GET" and urlsplit(request.url).path.endswith("()"):
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                returned = tuple(json.loads(response.body()).get("value", ()))
        body = request.body if isinstance(request.body, bytes) else str(request.body or "").encode()
        self._trips.saw(Sent(self._kind, request.method, request.url, body, returned))
        return response


class RoundTrips:
    """Gives storage clients a counting transport (`shared.runtime.build(settings,
    trips.transport)`); `take()` returns and resets the counts per kind ("table", "blob"), and
    `sent` lists what was sent since the last take."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.sent: list[Sent] = []

    def transport(self, kind: str) -> RequestsTransport:
        return CountingTransport(self, kind)

    def saw(self, sent: Sent) -> None:
        with self._lock:
            self._counts[sent.kind] += 1
            self.sent.append(sent)

    def take(self) -> dict[str, int]:
        with self._lock:
            taken = dict(self._counts)
            self._counts.clear()
            self.sent = []
        return taken
