"""Translating between the bytes a client sends and what a function sees, as the Functions host
does: the request target and its percent-decoding, headers, query parameters, the body's framing
and its size limit, and the client text that goes into the log."""

from __future__ import annotations

import re
from collections.abc import Iterable
from email.message import Message
from io import BufferedIOBase
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

MAX_BODY_BYTES = 100 * 1024 * 1024


class BodyError(Exception):
    """A request body that cannot be read: its framing is broken (400) or it is too large (413)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def read_body(headers: Message, rfile: BufferedIOBase) -> bytes:
    """Read the body framed by ``Content-Length`` or chunked, up to MAX_BODY_BYTES."""
    if "chunked" in headers.get("Transfer-Encoding", "").lower():
        return _read_chunked(rfile)
    length = headers.get("Content-Length")
    if length is None:
        return b""
    if not (length.strip().isascii() and length.strip().isdigit()):
        raise BodyError(400)
    if int(length) > MAX_BODY_BYTES:
        raise BodyError(413)
    body = rfile.read(int(length))
    if len(body) < int(length):
        raise BodyError(400)
    return body


def _read_chunked(rfile: BufferedIOBase) -> bytes:
    chunks, total = [], 0
    while True:
        try:
            size = int(rfile.readline(65537).split(b";")[0].strip(), 16)
        except ValueError:
            raise BodyError(400) from None
        if size < 0:
            raise BodyError(400)
        if size == 0:
            break
        total += size
        if total > MAX_BODY_BYTES:
            raise BodyError(413)
        chunks.append(rfile.read(size))
        rfile.readline()  # the CRLF closing the chunk
    while rfile.readline(65537) not in (b"\r\n", b"\n", b""):
        pass  # trailer fields are dropped
    return b"".join(chunks)


def loggable(path: str) -> str:
    """The path for the log, with long segments (tokens, say) cut short: a download link is a
    capability and must not end up in logs whole."""
    return printable("/".join(part if len(part) <= 48 else part[:8] + "…" for part in path.split("/")))


def printable(text: str) -> str:
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


def split_target(target: str) -> tuple[str, str]:
    """The path and the undecoded query of a request target (origin or absolute form)."""
    if not target.startswith("/"):
        parts = urlsplit(target)
        return parts.path or "/", parts.query
    path, _, query = target.partition("?")
    return path, query


def decode_path(path: str) -> str:
    """Percent-decode all but %2F, as ASP.NET Core does: an encoded slash stays in its segment."""
    return "%2F".join(unquote(part) for part in re.split("%2[fF]", path))
