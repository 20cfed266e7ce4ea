"""The handshake revisions of MCP (2024-11-05 to 2025-11-25): ``initialize`` names a protocol
version, ``notifications/initialized`` follows, and over Streamable HTTP every later request
carries the negotiated version in ``MCP-Protocol-Version`` (the transport keeps the session)."""

from __future__ import annotations

from speclint.load import Unreadable, one_line, text_field
from speclint.protocol.wire import CLIENT_INFO, Wire

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
OFFERED = VERSIONS[-1]


class Legacy:
    """A server spoken to after the handshake."""

    def __init__(self, wire: Wire, protocol_version: str, server_info: object):
        self.wire = wire
        self.protocol_version = protocol_version
        info = server_info if isinstance(server_info, dict) else {}
        self.name, self.version = text_field(info.get("name")), text_field(info.get("version"))

    @classmethod
    def open(cls, wire: Wire) -> Legacy:
        """Initialize: the server answers the version offered or another it speaks, which must be
        one of these revisions, as the official SDKs require."""
        params = {"protocolVersion": OFFERED, "capabilities": {}, "clientInfo": CLIENT_INFO}
        result = wire.request("initialize", params, {})
        version = result.get("protocolVersion")
        if version not in VERSIONS:
            raise Unreadable(
                f"{wire.name} answered initialize with protocol version {one_line(repr(version), 60)}; "
                f"speclint speaks {', '.join(VERSIONS)} through initialize"
            )
        session = cls(wire, version, result.get("serverInfo"))
        wire.notify("notifications/initialized", session.headers())
        return session

    def headers(self) -> dict[str, str]:
        return {"MCP-Protocol-Version": self.protocol_version}

    def request(self, method: str, params: dict) -> dict:
        return self.wire.request(method, params, self.headers())
