"""Reading the target: a tools/list JSON file, standard input, or an MCP endpoint over Streamable
HTTP (``initialize``, ``notifications/initialized``, every ``tools/list`` page). Whatever goes wrong
on the way is one ``Unreadable`` with a one-line reason."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import requests
import urllib3

from speclint.findings import __version__

PROTOCOL_VERSION = "2025-06-18"
MAX_PAGES = 1000
MAX_BODY_BYTES = 64 << 20  # one answer; a bigger one is refused, never buffered whole


class Unreadable(Exception):
    """The target could not be fetched or is not a tools list."""


def tools_from(document: object, source: str) -> list[dict]:
    """The tools of a tools/list result, a bare list, or a JSON-RPC response carrying one."""
    if (
        isinstance(document, dict)
        and "tools" not in document
        and ("result" in document or "error" in document)
    ):
        if "error" in document:
            raise Unreadable(f"{source} holds a JSON-RPC error: {rpc_error_text(document['error'])}")
        document = document["result"]
    if isinstance(document, dict) and "tools" in document:
        tools = document["tools"]
    elif isinstance(document, list):
        tools = document
    else:
        raise Unreadable(
            f'{source} is not a tools/list result (expected {{"tools": [...]}}, a list of tools '
            "or a JSON-RPC response with one)"
        )
    if not isinstance(tools, list) or not all(isinstance(t, dict) and "name" in t for t in tools):
        raise Unreadable(f"{source} is not a tools list: every tool must be a JSON object with a name")
    return tools


def all_pages(request: Callable[[str, dict], dict], source: str) -> list[dict]:
    """Every tool of `tools/list`, following `nextCursor` for at most `MAX_PAGES` pages."""
    tools: list[dict] = []
    seen: set[str] = set()
    params: dict = {}
    while True:
        result = request("tools/list", params)
        tools.extend(tools_from(result, source))
        cursor = result.get("nextCursor")
        if cursor is None or cursor == "":
            return tools
        if not isinstance(cursor, str):
            raise Unreadable(f"{source}: nextCursor is not a string")
        if cursor in seen:
            raise Unreadable(f"{source}: pagination does not end (cursor {one_line(repr(cursor), 80)} again)")
        if len(seen) + 1 >= MAX_PAGES:
            raise Unreadable(f"{source}: pagination does not end (more than {MAX_PAGES} pages)")
        seen.add(cursor)
        params = {"cursor": cursor}


def rpc_error_text(error: object) -> str:
    if isinstance(error, dict):
        return one_line(f"{error.get('code')} {error.get('message')}")
    return one_line(repr(error))


def printable(text: object) -> str:
    """`text` safe for a terminal: control, format (bidi overrides) and unpaired surrogate
    characters, which a hostile server may put in a tool name, become \\uXXXX escapes."""
    return "".join(c if c.isprintable() or c == " " else f"\\u{ord(c):04x}" for c in str(text))


def one_line(text: object, limit: int = 300) -> str:
    return printable(" ".join(str(text).split()))[:limit]


class NotFinite(ValueError):
    """A JSON number the rules cannot compare or round (NaN, Infinity, 1e400)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotFinite(f"number {text[:40]} is out of range")
    return value


def _no_constant(name: str) -> float:
    raise NotFinite(f"{name} is not a JSON number")


def loads(data: bytes | str) -> object:
    """JSON as the rules can read it: NaN, Infinity and numbers beyond a float (1e400) are refused
    (ValueError), so no rule meets a number it cannot compare or round."""
    return json.loads(data, parse_float=_finite, parse_constant=_no_constant)


def parse_json(data: bytes | str, source: str) -> object:
    try:
        return loads(data)
    except (ValueError, RecursionError) as exc:
        raise Unreadable(f"{source} is not JSON the rules can read ({one_line(str(exc), 120)})") from None


def read_target(target: str, headers: dict[str, str], timeout: float) -> list[dict]:
    if target == "-":
        return tools_from(parse_json(sys.stdin.buffer.read(), "standard input"), "standard input")
    if target.startswith(("http://", "https://")):
        return McpClient(target, headers, timeout).list_tools()
    try:
        data = Path(target).read_bytes()
    except OSError as exc:
        raise Unreadable(f"cannot read {target}: {exc.strerror or exc}") from None
    return tools_from(parse_json(data, target), target)


class McpClient:
    """Just enough of a Streamable HTTP MCP client to list tools."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float):
        self.url = url
        self.timeout = timeout
        self.http = requests.Session()
        self.http.headers.update(
            {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "User-Agent": f"speclint/{__version__}",
                **headers,
            }
        )
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.next_id = 0
        self.deadline = time.monotonic() + timeout

    def list_tools(self) -> list[dict]:
        self.deadline = time.monotonic() + self.timeout
        try:
            initialized = self.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "speclint", "version": __version__},
                },
            )
            if isinstance(initialized.get("protocolVersion"), str):
                self.protocol_version = initialized["protocolVersion"]
            self.notify("notifications/initialized")
            return all_pages(self.request, f"tools/list from {self.url}")
        finally:
            self.close()

    def close(self) -> None:
        if self.session_id is not None:
            # The spec asks clients to end a session they no longer need; best effort.
            with contextlib.suppress(requests.RequestException):
                self.http.delete(self.url, headers=self._headers(), timeout=self.timeout)
        self.http.close()

    def _headers(self) -> dict[str, str]:
        headers = {}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _post(self, message: dict) -> requests.Response:
        try:
            return self.http.post(
                self.url, data=json.dumps(message), headers=self._headers(), timeout=self._left(), stream=True
            )
        except requests.RequestException as exc:
            raise Unreadable(f"cannot reach {self.url} ({message['method']}): {type(exc).__name__}") from None

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Unreadable(
                f"{self.url} did not finish listing tools in time ({self.timeout:g}s for the whole exchange)"
            )
        return left

    def _chunks(self, response: requests.Response, method: str) -> Iterator[bytes]:
        """The body as it arrives, within the deadline and MAX_BODY_BYTES: a server that trickles
        bytes or sends keep-alives forever resets no read timeout here."""
        received = 0
        # read1 returns what has arrived; iter_content would wait for a whole 64 KiB chunk.
        while chunk := response.raw.read1(1 << 16, decode_content=True):
            received += len(chunk)
            if received > MAX_BODY_BYTES:
                raise Unreadable(f"{method} answer from {self.url} is over {MAX_BODY_BYTES >> 20} MiB")
            self._left()
            yield chunk

    def notify(self, method: str) -> None:
        response = self._post({"jsonrpc": "2.0", "method": method})
        response.close()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        request_id = self.next_id
        response = self._post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            if response.headers.get("Mcp-Session-Id"):
                self.session_id = response.headers["Mcp-Session-Id"]
            message = self._message(response, request_id, method)
        finally:
            response.close()
        status = response.status_code
        error = message.get("error") if isinstance(message, dict) else None
        if status // 100 != 2:
            detail = f" (JSON-RPC error {rpc_error_text(error)})" if error is not None else ""
            raise Unreadable(f"{method} failed at {self.url}: HTTP {status}{detail}")
        if error is not None:
            raise Unreadable(f"{method} failed at {self.url}: JSON-RPC error {rpc_error_text(error)}")
        if not isinstance(message, dict) or message.get("id") != request_id:
            raise Unreadable(
                f"{method} answer from {self.url} is not the JSON-RPC response to request {request_id}"
            )
        if not isinstance(message.get("result"), dict):
            raise Unreadable(f"{method} answer from {self.url} has no result object")
        return message["result"]

    def _message(self, response: requests.Response, request_id: int, method: str) -> object:
        """The answer's JSON-RPC message, from a JSON body or an event stream; None if unreadable
        on an HTTP error (the status then says what went wrong)."""
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        try:
            if media_type == "text/event-stream":
                return self._from_event_stream(response, request_id, method)
            return parse_json(b"".join(self._chunks(response, method)), f"{method} answer from {self.url}")
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:  # raw reads raise urllib3's
            raise Unreadable(f"{method} answer from {self.url} broke off: {type(exc).__name__}") from None
        except Unreadable:
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
            raise Unreadable(f"{source} ended without the response to request {request_id}")
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
