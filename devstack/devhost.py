"""Local development host for an Azure Functions Python v2 app, in place of ``func start``.

Usage: ``python -m devstack.devhost [--host H] [--port P] [--app-dir DIR]``

It serves the HTTP functions of ``DIR/function_app.py`` the way the Functions
host does locally, and promises:

* ``Values`` from ``local.settings.json`` (else ``local.settings.json.example``)
  become environment variables before the app is imported; variables already
  set are left alone.
* Routes come only from the app's own function index, under
  ``extensions.http.routePrefix`` from ``host.json`` (default ``api``), with
  Azure's template syntax: ``{id}``, ``{id?}``, ``{id:int}``, ``{*rest}``;
  literals match case-insensitively.
* Routes are tried in the order the Functions host tries them: by function
  name, ignoring case, the first whose template and methods match serving.
  The host sorts its functions by name (``FunctionMetadataManager``) and
  matches their routes in that order (``WebJobsRouter``, a plain ASP.NET
  ``RouteCollection``), not by ASP.NET's template precedence: a literal route
  loses to a parameter or catch-all route whose function's name sorts first
  (azure-functions-host#9876).
* An unmatched path, or a method the matching trigger does not list, answers
  404. A function that raises answers 500 with an empty body and its traceback
  on stderr. Request bodies over 100 MB answer 413.
* ``X-Forwarded-For`` gets the peer's ``ip:port`` appended, as Azure's front
  end does.
* Requests run in parallel on daemon threads; ``async def`` functions share one
  event loop, as they do in the Python worker. HTTP/1.1 keep-alive works.
* One line per request goes to stderr: method, path, status, duration. The
  method and path are the client's text, so control and format characters in
  them (ESC, CR, U+202E, ...) are written as backslash escapes.

Like ``func start`` it does not check function keys (its admin API may: devstack/admin.py).
Unlike it, it runs non-HTTP triggers only on request and provides no other bindings.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import json
import logging
import os
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import azure.functions as func
from azure.functions.decorators.function_app import Function
from azure.functions.timer import TimerRequest

from devstack import admin

MAX_BODY_BYTES = 100 * 1024 * 1024
DEFAULT_ROUTE_PREFIX = "api"
SETTINGS_FILES = ("local.settings.json", "local.settings.json.example")
# The host frames every response itself, so these never pass through from a function.
_FRAMING_HEADERS = frozenset({"connection", "content-length", "keep-alive", "transfer-encoding"})

log = logging.getLogger("devhost")


# --- settings -----------------------------------------------------------------


def read_settings(app_dir: Path) -> dict[str, str]:
    """Return ``Values`` from the first local settings file present, or ``{}``."""
    for name in SETTINGS_FILES:
        path = app_dir / name
        if path.is_file():
            values = json.loads(path.read_text(encoding="utf-8-sig")).get("Values") or {}
            return {key: _setting_text(value) for key, value in values.items() if value is not None}
    return {}


def _setting_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def apply_settings(values: Mapping[str, str]) -> None:
    """Export settings to ``os.environ``, never overriding a variable already set."""
    for name, value in values.items():
        if name in os.environ:
            log.info(
                "Skipping '%s' from local settings as it's already defined in the environment.",
                name,
            )
        else:
            os.environ[name] = value


def read_route_prefix(app_dir: Path) -> str:
    """Return ``extensions.http.routePrefix`` from ``host.json`` without slashes."""
    path = app_dir / "host.json"
    config = json.loads(path.read_text(encoding="utf-8-sig")) if path.is_file() else {}
    prefix = config.get("extensions", {}).get("http", {}).get("routePrefix")
    return (DEFAULT_ROUTE_PREFIX if prefix is None else prefix).strip("/")


# --- route templates ----------------------------------------------------------


def _is_integer(value: str, bits: int) -> bool:
    limit = 2 ** (bits - 1)
    return re.fullmatch(r"-?\d+", value) is not None and -limit <= int(value) < limit


def _is_guid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# Constraints not listed here accept any value.
_CONSTRAINTS: dict[str, Callable[[str], bool]] = {
    "int": lambda value: _is_integer(value, 32),
    "long": lambda value: _is_integer(value, 64),
    "bool": lambda value: value.lower() in ("true", "false"),
    "alpha": lambda value: re.fullmatch("[A-Za-z]+", value) is not None,
    "guid": _is_guid,
}
_PARAM_PATTERN = re.compile(r"\{([^{}]+)\}")


@dataclass(frozen=True)
class RouteParam:
    """One ``{...}`` parameter of a route template."""

    name: str
    constraints: tuple[str, ...] = ()
    optional: bool = False
    catch_all: bool = False
    default: str | None = None

    @classmethod
    def parse(cls, text: str) -> RouteParam:
        catch_all = text.startswith("*")
        head, has_default, default = text.lstrip("*").partition("=")
        name, *constraints = head.rstrip("?").split(":")
        return cls(
            name=name,
            constraints=tuple(c.split("(")[0].lower() for c in constraints),
            optional=head.endswith("?") or catch_all or bool(has_default),
            catch_all=catch_all,
            default=default if has_default else None,
        )

    def accepts(self, value: str) -> bool:
        return all(_CONSTRAINTS.get(name, lambda _: True)(value) for name in self.constraints)


@dataclass(frozen=True)
class RouteTemplate:
    """A compiled route template; ``params[i]`` is captured by regex group ``g{i}``."""

    text: str
    pattern: re.Pattern[str] = field(repr=False)
    params: tuple[RouteParam, ...]

    @classmethod
    def parse(cls, text: str) -> RouteTemplate:
        params: list[RouteParam] = []
        regex = "".join(
            _compile_segment(segment, params) for segment in filter(None, text.strip("/").split("/"))
        )
        pattern = re.compile(f"^{regex}/?$", re.IGNORECASE)
        return cls(text.strip("/"), pattern, tuple(params))

    def match(self, path: str) -> dict[str, str] | None:
        """Return the route params for a decoded request path, or None."""
        found = self.pattern.match(path)
        if found is None:
            return None
        values: dict[str, str] = {}
        for index, param in enumerate(self.params):
            value = found.group(f"g{index}")
            if not value:
                if param.default is not None:
                    values[param.name] = param.default
            elif param.accepts(value):
                values[param.name] = value
            else:
                return None
        return values


def _compile_segment(segment: str, params: list[RouteParam]) -> str:
    """Return a regex for one path segment."""
    pieces = _PARAM_PATTERN.split(segment)  # odd indexes hold parameter texts
    if len(pieces) == 3 and pieces[0] == pieces[2] == "":
        param = RouteParam.parse(pieces[1])
        regex = f"/(?P<{_add_group(params, param)}>{'.*' if param.catch_all else '[^/]+'})"
        return f"(?:{regex})?" if param.optional else regex
    regex = "/"
    for index, piece in enumerate(pieces):
        if index % 2:
            regex += f"(?P<{_add_group(params, RouteParam.parse(piece))}>[^/]+)"
        else:
            regex += re.escape(piece)
    return regex


def _add_group(params: list[RouteParam], param: RouteParam) -> str:
    params.append(param)
    return f"g{len(params) - 1}"


# --- the app's function index -------------------------------------------------


@dataclass(frozen=True)
class Route:
    """An HTTP function as registered by the app."""

    name: str
    template: RouteTemplate
    methods: tuple[str, ...] | None  # None: every method
    arg_name: str
    auth_level: str | None  # informational: like func start, keys are not checked
    function: Callable[..., Any] = field(repr=False)
    wants_context: bool = False

    def allows(self, method: str) -> bool:
        return self.methods is None or method.upper() in self.methods


@dataclass(frozen=True)
class BackgroundFunction:
    """A non-HTTP function: listed at start-up, run only on demand through the admin API
    (`POST /admin/functions/{name}`), as `func start` allows for timer triggers."""

    name: str
    trigger_type: str
    arg_name: str = ""
    function: Callable[..., Any] | None = field(default=None, repr=False)

    def run(self) -> Any:
        if self.trigger_type != "timerTrigger" or self.function is None:
            raise TypeError(f"{self.name} is a {self.trigger_type}; the dev host runs timer triggers only")
        return self.function(**{self.arg_name: TimerRequest(past_due=False)})


@dataclass(frozen=True)
class LoadedApp:
    """The indexed app: routes in registration order, plus the functions not served."""

    directory: Path
    route_prefix: str
    routes: tuple[Route, ...]
    background: tuple[BackgroundFunction, ...] = ()
    _matching_order: tuple[Route, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_matching_order", tuple(sorted(self.routes, key=matching_key)))

    def find(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        """Return the route serving ``method`` on a decoded ``path`` and its params: the first, in
        the host's order, whose template matches and whose trigger lists the method."""
        for route in self._matching_order:
            params = route.template.match(path)
            if params is not None and route.allows(method):
                return route, params
        return None


def matching_key(route: Route) -> str:
    """Where a route stands in the order the Functions host tries routes: its function's name,
    compared as .NET's ``StringComparer.OrdinalIgnoreCase`` compares the names Azure allows
    (ASCII letters, digits, ``_`` and ``-``), that is upper-cased, code point by code point."""
    return route.name.upper()


def load_app(app_dir: str | os.PathLike[str]) -> LoadedApp:
    """Apply local settings, import ``function_app`` from ``app_dir`` and index it."""
    directory = Path(app_dir).resolve()
    apply_settings(read_settings(directory))
    prefix = read_route_prefix(directory)
    register = _find_function_register(_import_function_app(directory))
    routes, background = [], []
    for function in register.get_functions():  # only once: a second call fails on duplicate names
        if function.is_http_function():
            routes.append(_route_for(function, prefix))
        else:
            background.append(_background_for(function))
    return LoadedApp(directory, prefix, tuple(routes), tuple(background))


def _import_function_app(directory: Path) -> ModuleType:
    if sys.path[:1] != [str(directory)]:
        sys.path.insert(0, str(directory))
    # Loaded by file path so a `function_app` cached from another directory is never reused.
    spec = importlib.util.spec_from_file_location("function_app", directory / "function_app.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {directory / 'function_app.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["function_app"] = module
    spec.loader.exec_module(module)
    return module


def _find_function_register(module: ModuleType) -> func.FunctionRegister:
    found = {id(value): value for value in vars(module).values() if isinstance(value, func.FunctionRegister)}
    if len(found) != 1:
        raise RuntimeError(
            f"function_app.py must define exactly one FunctionApp instance, found {len(found)}"
        )
    return next(iter(found.values()))


def _route_for(function: Function, prefix: str) -> Route:
    trigger = function.get_trigger()
    name = function.get_function_name()
    route = trigger.route if trigger.route is not None else name
    user_function = function.get_user_function()
    return Route(
        name=name,
        template=RouteTemplate.parse("/".join(part for part in (prefix, route.strip("/")) if part)),
        methods=tuple(_enum_name(method) for method in trigger.methods or ()) or None,
        arg_name=trigger.name,
        auth_level=None if trigger.auth_level is None else _enum_name(trigger.auth_level),
        function=user_function,
        wants_context="context" in inspect.signature(user_function).parameters,
    )


def _background_for(function: Function) -> BackgroundFunction:
    trigger = function.get_trigger()
    return BackgroundFunction(
        name=function.get_function_name(),
        trigger_type=_trigger_type(function),
        arg_name=getattr(trigger, "name", ""),
        function=function.get_user_function(),
    )


def _enum_name(value: Any) -> str:
    """``HttpMethod.GET``, ``"get"`` and ``"HttpMethod.GET"`` all give ``"GET"``."""
    return str(value).upper().rsplit(".", 1)[-1]


def _trigger_type(function: Function) -> str:
    trigger = function.get_trigger()
    return trigger.get_binding_name() if trigger is not None else "unknown"


# --- invocation ---------------------------------------------------------------


class DevContext(func.Context):
    """The ``context`` argument the Python worker passes to functions that declare one."""

    _thread_local = threading.local()

    def __init__(self, function_name: str, function_directory: str) -> None:
        self._invocation_id = str(uuid.uuid4())
        self._function_name = function_name
        self._function_directory = function_directory

    @property
    def invocation_id(self) -> str:
        return self._invocation_id

    @property
    def thread_local_storage(self) -> threading.local:
        return self._thread_local

    @property
    def function_name(self) -> str:
        return self._function_name

    @property
    def function_directory(self) -> str:
        return self._function_directory

    @property
    def trace_context(self) -> None:
        return None

    @property
    def retry_context(self) -> None:
        return None


class EventLoopThread:
    """One event loop on its own thread that runs every async function."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="devhost-asyncio", daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(_await(awaitable), self._loop).result()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def to_http_answer(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Turn a function's return value into (status, headers, body) as the worker does."""
    if isinstance(result, str):
        result = func.HttpResponse(result)
    if not isinstance(result, func.HttpResponse):
        raise TypeError(f"an HTTP function must return func.HttpResponse, got {type(result).__name__}")
    headers = [
        (name, value) for name, value in result.headers.items() if name.lower() not in _FRAMING_HEADERS
    ]
    if "content-type" not in {name.lower() for name, _ in headers}:
        headers.append(("Content-Type", _content_type(result)))
    return int(result.status_code), headers, result.get_body() or b""


def _content_type(response: func.HttpResponse) -> str:
    if response.mimetype.startswith("text/"):
        return f"{response.mimetype}; charset={response.charset}"
    return response.mimetype


# --- HTTP ---------------------------------------------------------------------


class _BodyError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


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
        path, query = _split_target(self.path)
        status = self._respond(path, query)
        elapsed = (time.perf_counter() - started) * 1000
        log.info("%s %s %d %.1fms", _printable(self.command), _loggable(path), status, elapsed)

    def _respond(self, path: str, query: str) -> int:
        try:
            body = self._read_body()
        except _BodyError as error:
            self.close_connection = True
            return self._send(error.status, [("Connection", "close")], b"")
        if path.lower().startswith(admin.ADMIN_PREFIX):
            request = admin.AdminRequest(self.command, path, merge_headers(self.headers.items()), query, body)
            return self._send(
                *self.server.admin.answer(request, self.server.app.background, self.server.loop.run)
            )
        found = self.server.app.find(self.command, _decode_path(path))
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

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        if not (length.strip().isascii() and length.strip().isdigit()):
            raise _BodyError(400)
        if int(length) > MAX_BODY_BYTES:
            raise _BodyError(413)
        body = self.rfile.read(int(length))
        if len(body) < int(length):
            raise _BodyError(400)
        return body

    def _read_chunked(self) -> bytes:
        chunks, total = [], 0
        while True:
            try:
                size = int(self.rfile.readline(65537).split(b";")[0].strip(), 16)
            except ValueError:
                raise _BodyError(400) from None
            if size < 0:
                raise _BodyError(400)
            if size == 0:
                break
            total += size
            if total > MAX_BODY_BYTES:
                raise _BodyError(413)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()  # the CRLF closing the chunk
        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
            pass  # trailer fields are dropped
        return b"".join(chunks)

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
        self.server_name, self.server_port = self.server_address[:2]

    @property
    def authority(self) -> str:
        host, port = self.server_address[:2]
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


def _loggable(path: str) -> str:
    """The path for the log, with long segments (tokens, say) cut short: a download link is a
    capability and must not end up in logs whole."""
    return _printable("/".join(part if len(part) <= 48 else part[:8] + "…" for part in path.split("/")))


def _printable(text: str) -> str:
    """Client text for a log line: what a terminal would not show as itself (ESC, CR, NUL,
    U+202E, ...) as its backslash escape, so a request cannot forge or hide log lines."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def merge_headers(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-case header names; repeated headers are joined with ", "."""
    headers: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


def append_forwarded_for(existing: str | None, peer: tuple[Any, ...]) -> str:
    """Append ``ip:port`` (``[ip]:port`` for IPv6) to an X-Forwarded-For value."""
    host, port = peer[:2]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{existing}, {address}" if existing else address


def first_query_values(query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(name, value)
    return params


def _split_target(target: str) -> tuple[str, str]:
    if not target.startswith("/"):
        parts = urlsplit(target)
        return parts.path or "/", parts.query
    path, _, query = target.partition("?")
    return path, query


def _decode_path(path: str) -> str:
    """Percent-decode all but %2F, as ASP.NET Core does: an encoded slash stays in its segment."""
    return "%2F".join(unquote(part) for part in re.split("%2[fF]", path))


# --- entry points -------------------------------------------------------------


def make_server(app_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 7071) -> DevServer:
    """Load the app and bind a server to it (port 0 picks a free port); call serve_forever()."""
    return DevServer((host, port), load_app(app_dir))


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


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devstack.devhost", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7071)
    parser.add_argument("--app-dir", default=".", help="directory holding function_app.py (default: .)")
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(asctime)s] %(message)s")
    app_dir = Path(args.app_dir).resolve()
    os.chdir(app_dir)  # func start runs functions with the app directory as working directory
    server = make_server(app_dir, args.host, args.port)
    signal.signal(signal.SIGTERM, _interrupt)
    print(banner(server), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
