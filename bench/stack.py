"""How a bench run calls the app: function_app loaded in this process with every storage call
counted (`Handlers`), and the made-up buyers every measurement sends. The services it calls are
`devstack.services.Stack`."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import uuid
from collections.abc import Callable
from typing import TypedDict
from urllib.parse import urlsplit

from azure.core.pipeline.transport import RequestsTransport

from devstack.counting import RoundTrips, Sent
from devstack.services import Stack

_addresses = itertools.count(1)


def address() -> str:
    n = next(_addresses)
    return f"127.{100 + n // 62500}.{n // 250 % 250}.{n % 250 + 1}"


def buyer() -> dict[str, str]:
    return {"email": f"bench.{uuid.uuid4().hex[:12]}@example.org"}


def keyed() -> dict[str, str]:
    return {**buyer(), "idempotency_key": f"bench-{uuid.uuid4().hex}"}


_MESSAGE = re.compile(rb"<QueueMessage>")


class QueueTrips(RoundTrips):
    """RoundTrips whose queue clients also record the messages each read returns, so that a
    read of 32 messages counts 32 at its queue, as Azure's per-queue target does."""

    def transport(self, kind: str) -> RequestsTransport:
        return _QueueTransport(self) if kind == "queue" else super().transport(kind)


class _QueueTransport(RequestsTransport):
    def __init__(self, trips: RoundTrips):
        super().__init__()
        self._trips = trips

    def send(self, request, **kwargs):
        response = super().send(request, **kwargs)
        returned: tuple[dict, ...] = ()
        if request.method == "GET" and urlsplit(request.url).path.endswith("/messages"):
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                returned = tuple({"message": n} for n in range(len(_MESSAGE.findall(response.body()))))
        body = request.body if isinstance(request.body, bytes) else str(request.body or "").encode()
        self._trips.saw(Sent("queue", request.method, request.url, body, returned))
        return response


class Counted(TypedDict):
    """What one call cost: its answer's status, the storage requests it sent by kind, and the
    Brevo calls the sandbox saw."""

    status: int | None
    table: int
    blob: int
    queue: int
    brevo: int


class Handlers:
    """function_app loaded in this process against the run's Azurite, every storage client
    carrying the counting policy; requests go through the real handlers as func.HttpRequest."""

    def __init__(self, stack: Stack):
        os.environ.update(stack.env())
        import azure.functions as func

        import function_app
        from shared import runtime

        self.func = func
        self.stack = stack
        self.counter = QueueTrips()
        self.settings = runtime.settings()
        runtime._services = runtime.build(self.settings, self.counter.transport)
        self.functions = {
            f.get_function_name(): f.get_user_function() for f in function_app.app.get_functions()
        }

    def post(self, payload: dict, *, ip: str = "203.0.113.7", headers: dict | None = None):
        """POST /api/a2a/purchase through the real function handler."""
        request = self.func.HttpRequest(
            method="POST",
            url="http://localhost:7071/api/a2a/purchase",
            headers={"content-type": "application/json", "x-forwarded-for": f"{ip}:50000", **(headers or {})},
            params={},
            route_params={},
            body=json.dumps(payload).encode(),
        )
        return self.functions["purchase"](req=request)

    def store_with(self, **overrides):
        """The same app on other settings (say a low limit), still counted at the transport."""
        from dataclasses import replace

        from shared import runtime

        return runtime.build(replace(self.settings, **overrides), self.counter.transport)

    def counted(self, call: Callable[[], object]) -> Counted:
        self.counter.take()
        before = self.stack.brevo_calls()
        response = call()
        counts = self.counter.take()
        status = getattr(response, "status_code", None) or getattr(response, "status", None)
        return {
            "status": status,
            "table": counts.get("table", 0),
            "blob": counts.get("blob", 0),
            "queue": counts.get("queue", 0),
            "brevo": self.stack.brevo_calls() - before,
        }
