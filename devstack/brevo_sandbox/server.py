"""The HTTP layer: reads requests off the socket (Content-Length or chunked, at most 10 MiB),
hands them to the app, and writes HTTP/1.1 responses with an exact Content-Length so keep-alive
clients work. One log line per request (method, path, status) goes to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from devstack.brevo_sandbox.app import SandboxApp
from devstack.brevo_sandbox.limits import DEFAULT_TIER
from devstack.brevo_sandbox.wire import ApiError, Request, Response, error_response

MAX_BODY_BYTES = 10 * 1024 * 1024


def _error_code(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


class SandboxHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without this, Nagle and delayed ACKs add 40 ms per
    # keep-alive request.
    disable_nagle_algorithm = True
    server_version = "BrevoSandbox/1.0"
    server: SandboxServer

    def do_GET(self) -> None:
        self._serve()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _serve(self) -> None:
        url = urlsplit(self.path)
        try:
            body = self._read_body()
        except ApiError as err:
            self.close_connection = True
            method = "GET" if self.command == "HEAD" else self.command
            self._write(self.server.app.refuse(method, url.path, err))
            return
        method = "GET" if self.command == "HEAD" else self.command
        request = Request(method, url.path, parse_qs(url.query), self.headers, body)
        self._write(self.server.app.handle(request))

    def _read_body(self) -> bytes:
        # The body is always drained, even for requests we reject, so the
        # next request on a keep-alive connection starts at a clean boundary.
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "bad_request", "Invalid Content-Length") from None
        if length < 0:
            raise ApiError(400, "bad_request", "Invalid Content-Length")
        if length > MAX_BODY_BYTES:
            raise ApiError(413, "payload_too_large", "Request body is too large")
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                size = int(self.rfile.readline(1024).split(b";")[0].strip(), 16)
            except ValueError:
                raise ApiError(400, "bad_request", "Invalid chunked body") from None
            total += size
            if total > MAX_BODY_BYTES:
                raise ApiError(413, "payload_too_large", "Request body is too large")
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _write(self, response: Response) -> None:
        self.send_response(response.status)
        # RFC 9110 forbids Content-Length (and a body) on 204 responses.
        if response.status != 204:
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in response.headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and response.status != 204:
            self.wfile.write(response.body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """JSON instead of http.server's HTML, for requests that fail to parse."""
        self.close_connection = True
        text = message or explain or HTTPStatus(code).phrase
        self._write(error_response(code, _error_code(code), text))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = urlsplit(getattr(self, "path", "") or "").path or "-"
        status = code.value if isinstance(code, HTTPStatus) else code
        sys.stderr.write(f"{getattr(self, 'command', None) or '-'} {path} {status}\n")

    def log_message(self, format: str, *args: Any) -> None:
        # http.server's own messages quote the request line; neither it nor the peer address
        # goes into the log.
        code = next((arg for arg in args if isinstance(arg, int)), None)
        sys.stderr.write(f"request refused by the HTTP layer{f' ({code})' if code else ''}\n")


class SandboxServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog of 5 resets bursts of concurrent clients

    def __init__(self, address: tuple[str, int], app: SandboxApp) -> None:
        self.app = app
        super().__init__(address, SandboxHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (say, timed out during an injected delay) is fine.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def make_server(
    host: str,
    port: int,
    api_key: str | None = None,
    *,
    tier: str = DEFAULT_TIER,
    limits: Mapping[str, str | None] | None = None,
) -> ThreadingHTTPServer:
    """Bind (port 0 picks a free one) but do not serve; call serve_forever(). *tier* and *limits*
    as for ``SandboxApp``; a bad one raises ValueError before anything is bound."""
    return SandboxServer((host, port), SandboxApp(api_key, tier=tier, limits=limits))
