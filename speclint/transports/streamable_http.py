"""speclint's client for the Streamable HTTP transport: one POST a JSON-RPC message, answered
with JSON or an event stream, all within one deadline however the server trickles its bytes.

The revision decides the headers (``speclint.protocol``); this module keeps the ``Mcp-Session-Id``
an ``initialize`` answer assigns, sends it on every later request and deletes the session at the
end. urllib3's read timeout runs afresh for every read, so a server sending its headers a byte at
a time would never reach it: every connection is watched, and shut at the request's deadline."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping

import requests
import requests.adapters
import urllib3

from speclint.findings import __version__
from speclint.limits import Limits, human
from speclint.load import Listing, Unreadable, parse_json, rpc_error_text
from speclint.protocol import negotiate
from speclint.protocol.wire import METHOD_NOT_FOUND, Garbled, Refused, TimedOut

MAX_BODY_BYTES = 64 << 20  # one answer; a bigger one is refused, never buffered whole
CLOSE_SECONDS = 2.0  # for the DELETE that ends a session, within what is left of the deadline


def list_tools(url: str, headers: dict[str, str], timeout: float, limits: Limits | None = None) -> Listing:
    """Every tool the MCP endpoint at `url` lists; `headers` go on every request; `limits` caps
    the bytes of every answer together and the tools listed."""
    limits = limits or Limits()
    wire = HttpWire(url, headers, timeout, limits.bytes)
    try:
        return negotiate.list_tools(wire, limits=limits)
    finally:
        wire.close()


class HttpWire:
    """One MCP endpoint, spoken to within one deadline."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float, max_bytes: int | None = None):
        self.name = self.url = url
        self.timeout = timeout
        self.http = requests.Session()
        self.adapter = _WatchedAdapter()
        for scheme in ("http://", "https://"):
            self.http.mount(scheme, self.adapter)
        self.http.headers.update(
            {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "User-Agent": f"speclint/{__version__}",
                **headers,
            }
        )
        self.session_id: str | None = None
        self.session_version: str | None = None  # the MCP-Protocol-Version a session goes with
        self.next_id = 0
        self.received = 0  # body bytes of every answer, at most max_bytes
        self.max_bytes = Limits().bytes if max_bytes is None else max_bytes
        self.deadline = time.monotonic() + timeout
        self._until = self.deadline  # the current request's own deadline
        self._watch_lock = threading.Lock()
        self._watching = 0  # which request's deadline timer may shut connections
        self._watch_timer: threading.Timer | None = None

    def close(self) -> None:
        self._until = min(self.deadline, time.monotonic() + CLOSE_SECONDS)
        if self.session_id is not None and self._until > time.monotonic():
            # The spec asks clients to end a session they no longer need; best effort.
            with self._watched(), contextlib.suppress(requests.RequestException):
                left = self._until - time.monotonic()
                self.http.delete(self.url, headers=self._session_headers(), timeout=max(left, 0.01))
        self.http.close()

    @contextlib.contextmanager
    def _watched(self) -> Iterator[None]:
        """Every connection shut once the request's deadline passes, should it still be waiting.

        A timer already firing when its request ends (a read that timed out on its own at the same
        moment, on a busy machine) must not shut the next request's connection: the shut happens
        under a lock, and only while its own request is still the one running."""
        with self._watch_lock:
            self._watching += 1
            watching = self._watching

        def shut() -> None:
            with self._watch_lock:
                if self._watching == watching:
                    self.adapter.shut()

        timer = threading.Timer(max(self._until - time.monotonic(), 0), shut)
        timer.daemon = True
        timer.start()
        self._watch_timer = timer
        try:
            yield
        finally:
            timer.cancel()
            with self._watch_lock:
                self._watching += 1

    def notify(self, method: str, headers: Mapping[str, str]) -> None:
        self._until = self.deadline
        with self._watched():
            response = self._post({"jsonrpc": "2.0", "method": method}, method, headers)
            response.close()

    def request(
        self, method: str, params: dict, headers: Mapping[str, str], wait: float | None = None
    ) -> dict:
        self.next_id += 1
        request_id = self.next_id
        self._until = self.deadline if wait is None else min(self.deadline, time.monotonic() + wait)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        with self._watched():
            response = self._post(message, method, headers)
            try:
                answer = self._message(response, request_id, method)
            finally:
                response.close()
        result = self._result(response.status_code, answer, request_id, method)
        if method == "initialize" and response.headers.get("Mcp-Session-Id"):
            self.session_id = response.headers["Mcp-Session-Id"]
        return result

    def _result(self, status: int, answer: object, request_id: int, method: str) -> dict:
        """The result an answer carries; a JSON-RPC error or an HTTP error status is Refused."""
        error = answer.get("error") if isinstance(answer, dict) else None
        where = f"{method} failed at {self.url}"
        if status // 100 != 2 and error is None:
            code = METHOD_NOT_FOUND if status == 404 else None  # as the SDKs read a bare 404
            raise Refused(f"{where}: HTTP {status}", code)
        if status // 100 != 2:
            raise Refused.carrying(f"{where}: HTTP {status} (JSON-RPC error {rpc_error_text(error)})", error)
        if error is not None:
            raise Refused.carrying(f"{where}: JSON-RPC error {rpc_error_text(error)}", error)
        source = f"{method} answer from {self.url}"
        if not isinstance(answer, dict) or answer.get("id") != request_id:
            raise Garbled(f"{source} is not the JSON-RPC response to request {request_id}")
        if not isinstance(answer.get("result"), dict):
            raise Garbled(f"{source} has no result object")
        return answer["result"]

    def _session_headers(self) -> dict[str, str]:
        headers = {}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
            if self.session_version is not None:
                headers["MCP-Protocol-Version"] = self.session_version
        return headers

    def _post(self, message: dict, method: str, headers: Mapping[str, str]) -> requests.Response:
        sent = {**self._session_headers(), **headers}
        self.session_version = sent.get("MCP-Protocol-Version", self.session_version)
        try:
            return self.http.post(
                self.url, data=json.dumps(message), headers=sent, timeout=self._left(method), stream=True
            )
        except requests.ReadTimeout:
            raise self._out_of_time(method) from None
        except requests.RequestException as exc:
            if time.monotonic() >= self._until:  # shut at the deadline while the headers trickled
                raise self._out_of_time(method) from None
            raise Unreadable(f"cannot reach {self.url} ({method}): {type(exc).__name__}") from None

    def _left(self, method: str) -> float:
        left = self._until - time.monotonic()
        if left <= 0:
            raise self._out_of_time(method)
        return left

    def _out_of_time(self, method: str) -> Unreadable:
        if self._until < self.deadline:
            return TimedOut(f"{self.url} did not answer {method} in time")
        return Unreadable(
            f"{self.url} did not finish listing tools in time ({self.timeout:g}s for the whole exchange)"
        )

    def _chunks(self, response: requests.Response, method: str) -> Iterator[bytes]:
        """The body as it arrives, within the deadline and MAX_BODY_BYTES: a server that trickles
        bytes or sends keep-alives forever resets no read timeout here."""
        received = 0
        # read1 returns what has arrived; iter_content would wait for a whole 64 KiB chunk.
        while chunk := response.raw.read1(1 << 16, decode_content=True):
            received += len(chunk)
            self.received += len(chunk)
            if received > MAX_BODY_BYTES:
                raise Garbled(f"{method} answer from {self.url} is over {MAX_BODY_BYTES >> 20} MiB")
            if self.received > self.max_bytes:
                raise Unreadable(
                    f"the answers from {self.url} are over {human(self.max_bytes)} in all, at {method} "
                    "(--max-bytes)"
                )
            self._left(method)
            yield chunk
        self._left(method)  # a body cut off by the deadline's shut is not the whole answer

    def _message(self, response: requests.Response, request_id: int, method: str) -> object:
        """The answer's JSON-RPC message, from a JSON body or an event stream; None if unreadable
        on an HTTP error (the status then says what went wrong)."""
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        try:
            if media_type == "text/event-stream":
                return self._from_event_stream(response, request_id, method)
            body = b"".join(self._chunks(response, method))
            try:
                return parse_json(body, f"{method} answer from {self.url}")
            except Unreadable as exc:
                raise Garbled(str(exc)) from None
        except requests.ReadTimeout:  # raw reads raise it when no byte comes within the timeout
            raise self._out_of_time(method) from None
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:  # raw reads raise urllib3's
            if isinstance(exc, urllib3.exceptions.ReadTimeoutError) or time.monotonic() >= self._until:
                raise self._out_of_time(method) from None
            raise Garbled(f"{method} answer from {self.url} broke off: {type(exc).__name__}") from None
        except Garbled:
            if response.status_code // 100 != 2:
                return None
            raise

    def _from_event_stream(self, response: requests.Response, request_id: int, method: str) -> dict:
        """The response to `request_id` among the stream's events (others are skipped)."""
        source = f"{method} event stream from {self.url}"
        buffer = b""
        data: list[str] = []
        for chunk in self._chunks(response, method):
            buffer += chunk
            while b"\n" in buffer:
                raw, buffer = buffer.split(b"\n", 1)
                line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
                if line == "":
                    message = self._event(data, request_id, source)
                    data = []
                    if message is not None:
                        return message
                elif not line.startswith(":"):
                    field, _, value = line.partition(":")
                    if field == "data":
                        data.append(value[1:] if value.startswith(" ") else value)
        if buffer.strip():
            field, _, value = buffer.decode("utf-8", errors="replace").rstrip("\r").partition(":")
            if field == "data":
                data.append(value[1:] if value.startswith(" ") else value)
        message = self._event(data, request_id, source)
        if message is None:
            raise Garbled(f"{source} ended without the response to request {request_id}")
        return message

    @staticmethod
    def _event(data: list[str], request_id: int, source: str) -> dict | None:
        if not data:
            return None
        try:
            message = parse_json("\n".join(data), source)
        except Unreadable:  # not a JSON-RPC message (a keep-alive, say): not the answer
            return None
        if (
            isinstance(message, dict)
            and message.get("id") == request_id
            and ("result" in message or "error" in message)
        ):
            return message
        return None


class _WatchedPool(urllib3.HTTPConnectionPool):
    """A pool that keeps every connection it opens, so they can be shut from another thread."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.opened: list = []

    def _new_conn(self):
        connection = super()._new_conn()
        self.opened.append(connection)
        return connection


class _WatchedTlsPool(_WatchedPool, urllib3.HTTPSConnectionPool):
    """The same over TLS: HTTPSConnectionPool comes before HTTPConnectionPool in its MRO, so its
    connections, scheme and _new_conn are the ones kept."""


_POOLS = {"http": _WatchedPool, "https": _WatchedTlsPool}


class _WatchedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter over watched pools, directly or through an HTTP proxy."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kwargs):
        manager = super().proxy_manager_for(proxy, **kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = _POOLS
        return manager

    def shut(self) -> None:
        """Shut every connection's socket: a read waiting on it returns at once."""
        for manager in (self.poolmanager, *self.proxy_manager.values()):
            for key in list(manager.pools.keys()):
                pool = manager.pools.get(key)
                for connection in getattr(pool, "opened", ()):
                    sock = getattr(connection, "sock", None)
                    if sock is not None:
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_RDWR)
