"""The dev host's HTTP server: one thread per connection, each request routed to the admin API or
to the app's function index, the function called and its answer framed."""

from __future__ import annotations

import inspect
import logging
import os
import socket
import socketserver
import sys
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import azure.functions as func

from devstack import admin
from devstack.devhost.app_index import LoadedApp, Route, load_app
from devstack.devhost.invocation import DevContext, EventLoopThread, to_http_answer
from devstack.devhost.timers import TimerRunner
from devstack.devhost.wire import (
    BodyError,
    append_forwarded_for,
    decode_path,
    first_query_values,
    loggable,
    merge_headers,
    printable,
    read_body,
    split_target,
)

log = logging.getLogger("devhost")


class DevRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without this, Nagle and delayed ACKs add 40 ms per
    # keep-alive request.
    disable_nagle_algorithm = True
    timeout = 120  # idle keep-alive connections are closed after this many seconds
    server: DevServer

    def __getattr__(self, name: str) -> Any:
        # BaseHTTPRequestHandler looks up do_<METHOD>; every method goes through one handler.
        if name.startswith("do_"):
            return self._handle
        raise AttributeError(name)

    def _handle(self) -> None:
        started = time.perf_counter()
        path, query = split_target(self.path)
        status = self._respond(path, query)
        elapsed = (time.perf_counter() - started) * 1000
        log.info("%s %s %d %.1fms", printable(self.command), loggable(path), status, elapsed)

    def _respond(self, path: str, query: str) -> int:
        try:
            body = read_body(self.headers, self.rfile)
        except BodyError as error:
            self.close_connection = True
            return self._send(error.status, [("Connection", "close")], b"")
        if path.lower().startswith(admin.ADMIN_PREFIX):
            call = admin.AdminRequest(self.command, path, merge_headers(self.headers.items()), query, body)
            return self._send(
                *self.server.admin.answer(call, self.server.app.background, self.server.loop.run)
            )
        found = self.server.app.find(self.command, decode_path(path))
        if found is None:
            return self._send(404, [], b"")
        route, route_params = found
        request = self._build_request(route_params, query, body)
        try:
            answer = to_http_answer(self._invoke(route, request))
        except Exception:
            log.exception("Executed 'Functions.%s' (Failed)", route.name)
            answer = (500, [], b"")
        return self._send(*answer)

    def _invoke(self, route: Route, request: func.HttpRequest) -> Any:
        arguments: dict[str, Any] = {route.arg_name: request}
        if route.wants_context:
            arguments["context"] = DevContext(route.name, str(self.server.app.directory))
        result = route.function(**arguments)
        return self.server.loop.run(result) if inspect.isawaitable(result) else result

    def _build_request(self, route_params: dict[str, str], query: str, body: bytes) -> func.HttpRequest:
        headers = merge_headers(self.headers.items())
        headers["x-forwarded-for"] = append_forwarded_for(headers.get("x-forwarded-for"), self.client_address)
        host = headers.get("host") or self.server.authority
        url = f"http://{host}{self.path}" if self.path.startswith("/") else self.path
        return func.HttpRequest(
            method=self.command,
            url=url,
            headers=headers,
            params=first_query_values(query),
            route_params=route_params,
            body=body,
        )

    def _send(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> int:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if status != 204:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and status not in (204, 304):
            self.wfile.write(body)
        return status

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _handle logs each request once it is answered

    def log_message(self, format: str, *args: Any) -> None:
        # http.server's own messages (a malformed request line, say) quote the request line, which
        # may hold a download token; neither it nor the peer address goes into the log.
        code = next((arg for arg in args if isinstance(arg, int)), None)
        log.warning("request refused by the HTTP layer%s", f" ({code})" if code else "")


class DevServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog of 5 resets bursts of concurrent clients

    def __init__(self, address: tuple[str, int], app: LoadedApp) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, DevRequestHandler)
        self.app = app
        self.admin = admin.AdminApi.from_env()  # after load_app has applied the local settings
        self.loop = EventLoopThread()

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, which can stall on DNS.
        socketserver.TCPServer.server_bind(self)
        # getsockname() gave the address: its host is text (typeshed allows bytes for a bind).
        self.server_name, self.server_port = cast("tuple[str, int]", self.server_address[:2])

    @property
    def authority(self) -> str:
        host, port = self.server_name, self.server_port  # server_bind set them from server_address
        host = "localhost" if host in ("0.0.0.0", "::") else host
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.authority}"

    def server_close(self) -> None:
        super().server_close()
        self.loop.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client hanging up is routine
            super().handle_error(request, client_address)


def make_server(app_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 7071) -> DevServer:
    """Load the app and bind a server to it (port 0 picks a free port); call serve_forever()."""
    return DevServer((host, port), load_app(app_dir))


def scheduled_timers(server: DevServer, which: str) -> TimerRunner:
    """The app's timer triggers to run on their schedules: `all`, `none`, or names with commas.
    An unknown name is an error naming the timers there are."""
    timers = {f.name: f for f in server.app.background if f.trigger_type == "timerTrigger" and f.schedule}
    if which == "all":
        chosen = list(timers)
    elif which == "none":
        chosen = []
    else:
        chosen = [name.strip() for name in which.split(",") if name.strip()]
        unknown = [name for name in chosen if name not in timers]
        if unknown:
            there = ", ".join(timers) or "none"
            raise ValueError(f"no timer named {', '.join(unknown)}; the app has {there}")
    return TimerRunner((name, timers[name].schedule, timers[name].run) for name in chosen)


def banner(server: DevServer) -> str:
    """The start-up text: the function list, then ``Host started on <url>``."""
    lines = ["Functions:", ""]
    for route in server.app.routes:
        methods = f"[{','.join(route.methods)}] " if route.methods else ""
        lines.append(f"  {route.name}: {methods}{server.base_url}/{route.template.text}")
    for function in server.app.background:
        lines.append(f"  {function.name}: {function.trigger_type}")
    lines += ["", f"Host started on {server.base_url}"]
    return "\n".join(lines)
