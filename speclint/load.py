"""Reading a tools/list result, whether a file, standard input or a live server's pages hold it,
and what the report says about the server that sent it. Whatever goes wrong on the way is one
``Unreadable`` with a one-line reason.

MCP 2026-07-28 results carry ``resultType`` (absent means ``"complete"``: older servers send
none), the caching hints ``ttlMs`` and ``cacheScope``, and a ``serverInfo`` stamp in ``_meta``;
a result of any other ``resultType`` is no tools list. The live clients are ``speclint.transports.stdio``
and ``speclint.transports.streamable_http``; ``speclint.protocol.negotiate`` picks the protocol revision."""

from __future__ import annotations

import io
import json
import math
import os
import selectors
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from speclint.limits import MAX_PAGES, Deadline, Limits, human

MAX_NAME_CHARS = 256  # of a server's name or version: display only, and the server chooses it
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
CACHE_SCOPES = ("public", "private")


class Unreadable(Exception):
    """The target could not be fetched or is not a tools list, it is over a cap of
    ``speclint.limits``, or the run's deadline passed."""


@dataclass(frozen=True)
class Server:
    """What the report says about the server: who it says it is (display only, never trusted),
    the protocol revision spoken with it, and how long clients may cache its tool list."""

    name: str | None = None
    version: str | None = None
    protocol_version: str | None = None
    ttl_ms: int | None = None
    cache_scope: str | None = None

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "protocol_version": self.protocol_version,
            "ttl_ms": self.ttl_ms,
            "cache_scope": self.cache_scope,
        }


@dataclass(frozen=True)
class Listing:
    """The tools a target holds, each as the server sent it, and what is known of the server."""

    tools: list[dict]
    server: Server = field(default_factory=Server)


def tools_from(document: object, source: str) -> list[dict]:
    """The tools of a tools/list result, a bare list, or a JSON-RPC response carrying one."""
    document = _result(document, source)
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


def _result(document: object, source: str) -> object:
    """The result a JSON-RPC response carries (or the document itself), refused when it is not
    a complete one: an ``input_required`` result asks for input and holds no tools."""
    if (
        isinstance(document, dict)
        and "tools" not in document
        and ("result" in document or "error" in document)
    ):
        if "error" in document:
            raise Unreadable(f"{source} holds a JSON-RPC error: {rpc_error_text(document['error'])}")
        document = document["result"]
    if isinstance(document, dict) and document.get("resultType", "complete") != "complete":
        raise Unreadable(
            f"{source} is not a tools list: its resultType is "
            f"{one_line(repr(document['resultType']), 60)}, not 'complete'"
        )
    return document


def server_stamp(result: dict) -> tuple[str | None, str | None]:
    """The name and version in a result's ``_meta`` serverInfo stamp (2026-07-28), if any."""
    meta = result.get("_meta")
    stamp = meta.get(SERVER_INFO_KEY) if isinstance(meta, dict) else None
    if not isinstance(stamp, dict):
        return None, None
    return text_field(stamp.get("name")), text_field(stamp.get("version"))


def text_field(value: object) -> str | None:
    """A server's self-description field, if it is a string, cut to MAX_NAME_CHARS."""
    return value[:MAX_NAME_CHARS] if isinstance(value, str) else None


@dataclass
class Pages:
    """Every page of one tools/list, and what their caching hints allow taken together: the
    shortest time to live, and ``private`` if any page says so (a list is as private as its
    most private page)."""

    tools: list[dict] = field(default_factory=list)
    ttl_ms: int | None = None
    cache_scope: str | None = None
    stamp: tuple[str | None, str | None] = (None, None)
    limits: Limits = field(default_factory=Limits)

    def add(self, result: dict, source: str) -> None:
        self.tools.extend(within_limits(tools_from(result, source), self.limits, source, len(self.tools)))
        ttl = result.get("ttlMs")
        if isinstance(ttl, (int, float)) and not isinstance(ttl, bool):
            ttl = max(0, int(ttl))  # a negative time to live is read as 0, as the spec asks of clients
            self.ttl_ms = ttl if self.ttl_ms is None else min(self.ttl_ms, ttl)
        scope = result.get("cacheScope")
        if scope in CACHE_SCOPES and self.cache_scope != "private":
            self.cache_scope = scope
        if self.stamp == (None, None):
            self.stamp = server_stamp(result)


def within_limits(tools: list[dict], limits: Limits, source: str, before: int = 0) -> list[dict]:
    """`tools`, refused when they take the list past `limits.tools` (`before` came on earlier
    pages) or one of them is over `limits.tool_bytes` as JSON."""
    if before + len(tools) > limits.tools:
        raise Unreadable(
            f"{source} lists more than {limits.tools} tools (--max-tools {limits.tools}: raise it to lint "
            "them all)"
        )
    for index, tool in enumerate(tools):
        name = tool.get("name")
        label = one_line(repr(name[:80]), 80) if isinstance(name, str) else f"#{before + index}"
        try:
            size = len(json.dumps(tool, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        except RecursionError:
            raise Unreadable(f"{source}: tool {label} is nested too deep to read") from None
        if size > limits.tool_bytes:
            raise Unreadable(
                f"{source}: tool {label} is {size} bytes as JSON, over --max-tool-bytes "
                f"({human(limits.tool_bytes)})"
            )
    return tools


def all_pages(request: Callable[[str, dict], dict], source: str, limits: Limits | None = None) -> Pages:
    """Every page of `tools/list`, following `nextCursor` for at most `MAX_PAGES` pages and
    `limits.tools` tools."""
    pages = Pages(limits=limits or Limits())
    seen: set[str] = set()
    params: dict = {}
    while True:
        result = request("tools/list", params)
        pages.add(result, source)
        cursor = result.get("nextCursor")
        if cursor is None or cursor == "":
            return pages
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


def read_target(target: str, limits: Limits | None = None, deadline: Deadline | None = None) -> Listing:
    """A saved tools/list: a file, or standard input for ``-``, at most `limits.bytes` of it and,
    from a pipe, before `deadline`. One page is linted as it is; a 2026-07-28 result names its
    server in ``_meta`` and carries its caching hints."""
    limits = limits or Limits()
    if target == "-":
        source = "standard input"
        data = read_within(sys.stdin.buffer, limits.bytes, deadline, source)
    else:
        source = target
        try:
            with open(target, "rb") as stream:
                data = read_within(stream, limits.bytes, deadline, source)
        except OSError as exc:
            raise Unreadable(f"cannot read {target}: {exc.strerror or exc}") from None
    document = _result(parse_json(data, source), source)
    if not isinstance(document, dict):
        return Listing(within_limits(tools_from(document, source), limits, source))
    pages = Pages(limits=limits)
    pages.add(document, source)
    name, version = pages.stamp
    return Listing(pages.tools, Server(name, version, None, pages.ttl_ms, pages.cache_scope))


def read_within(stream, limit: int, deadline: Deadline | None, source: str) -> bytes:
    """All of `stream`, refused past `limit` bytes. A regular file is read at once; a pipe,
    terminal or device only as its bytes come, and never past `deadline`: a writer that
    trickles or never closes does not hold the run."""
    try:
        fd = stream.fileno()
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except (OSError, ValueError, io.UnsupportedOperation):  # an in-memory stream: read at once
        fd, regular = -1, True
    data = stream.read(limit + 1) if regular else _read_pipe(fd, limit, deadline, source)
    if len(data) > limit:
        raise Unreadable(f"{source} is over {human(limit)} (--max-bytes)")
    return data


def _read_pipe(fd: int, limit: int, deadline: Deadline | None, source: str) -> bytes:
    data = bytearray()
    # poll, not epoll: epoll refuses devices that are always ready (/dev/zero), poll says so
    with getattr(selectors, "PollSelector", selectors.SelectSelector)() as ready:
        ready.register(fd, selectors.EVENT_READ)
        while len(data) <= limit:
            left = None if deadline is None else deadline.left()
            if deadline is not None and left is not None and left <= 0:
                raise Unreadable(f"{source}: " + deadline.missed("its writer did not finish"))
            if not ready.select(left):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data += chunk
    return bytes(data)
