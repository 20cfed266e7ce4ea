"""Which protocol revision to speak: 2026-07-28 when the server does, else the ``initialize``
handshake, decided as the official SDKs' auto mode does (mcp 2.x, ``mode="auto"``): a
``server/discover`` probe first, and what each answer to it means is the table in
docs/speclint.md, "Protocol revisions"."""

from __future__ import annotations

from speclint.limits import Limits
from speclint.load import Listing, Server, Unreadable, all_pages, one_line
from speclint.protocol import legacy, modern
from speclint.protocol.legacy import Legacy
from speclint.protocol.modern import Modern
from speclint.protocol.wire import Garbled, Refused, TimedOut, Wire

PROBE_SECONDS = 10.0  # the official Python SDK's wait for server/discover
PROBE_SHARE = 1 / 3  # of the whole exchange's time, at most, so a silent probe leaves time to fall back


def list_tools(wire: Wire, probe: bool = True, limits: Limits | None = None) -> Listing:
    """Every tool the server lists (at most `limits.tools`), in the revision it speaks;
    `probe=False` goes straight to the handshake."""
    session = connect(wire) if probe else Legacy.open(wire)
    pages = all_pages(session.request, f"tools/list from {wire.name}", limits)
    name, version = (session.name, session.version) if session.name else pages.stamp
    server = Server(name, version, session.protocol_version, pages.ttl_ms, pages.cache_scope)
    return Listing(pages.tools, server)


def connect(wire: Wire, retried: bool = False) -> Legacy | Modern:
    try:
        discovered = modern.discover(wire, min(PROBE_SECONDS, wire.timeout * PROBE_SHARE))
    except (Refused, Garbled, TimedOut) as exc:
        supported = modern.versions_refused(exc)
        if supported is not None and modern.VERSION in supported and not retried:
            return connect(wire, retried=True)
        if supported is not None and not any(v in legacy.VERSIONS for v in supported):
            if modern.VERSION in supported:
                raise  # refused twice, at a version it names: its own error says the rest
            raise Unreadable(
                f"{wire.name} speaks only MCP {one_line(', '.join(supported), 120)}; speclint speaks "
                f"{modern.VERSION} and, through initialize, {', '.join(legacy.VERSIONS)}"
            ) from None
        return _handshake(wire, retried)
    if modern.VERSION not in (modern.supported_versions(discovered) or ()):
        return Legacy.open(wire)
    return Modern(wire, discovered)


def _handshake(wire: Wire, retried: bool) -> Legacy | Modern:
    try:
        return Legacy.open(wire)
    except Refused as exc:
        supported = modern.versions_refused(exc)
        if retried or supported is None or modern.VERSION not in supported:
            raise
        return connect(wire, retried=True)
