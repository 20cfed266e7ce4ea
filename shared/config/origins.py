"""Web origins (`scheme://host[:port]`) in their one written form, so an origin named in a setting
and the same origin named by an agent's `Signature-Agent` header compare equal."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

DEFAULT_PORTS = {"https": 443, "http": 80}
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")


def canonical_origin(text: str, *, paths: tuple[str, ...] = ("", "/")) -> str | None:
    """`text` as `scheme://host[:port]`: scheme and host lower-cased, the scheme's default port
    dropped, an IPv6 host in brackets; None unless it is an http or https URL with a host, no
    user info, query or fragment, and a path among `paths`. Hosts are ASCII (A-labels)."""
    if not isinstance(text, str) or not text.isascii() or any(c.isspace() for c in text):
        return None
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or parts.username is not None or parts.password is not None:
        return None
    if parts.query or parts.fragment or text.endswith(("?", "#")) or parts.path not in paths:
        return None
    host = _host(parts.hostname or "")
    if host is None:
        return None
    if port is not None and port != DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}:{port}"
    return f"{scheme}://{host}"


def _host(name: str) -> str | None:
    name = name.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return name if _HOST.match(name) else None
    return f"[{address.compressed}]" if address.version == 6 else address.compressed
