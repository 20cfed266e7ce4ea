"""Which client a request comes from, as the rate limit counts it: the rightmost trusted
X-Forwarded-For entry, or Front Door's socket address when the request carries the operator's
Front Door id. docs/governance.md explains the trust model."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable

from shared.config.settings_reader import canonical_guid

UNKNOWN_IP = "unknown"


def client_address(header: Callable[[str], str | None], *, hops: int = 0, front_door_id: str = "") -> str:
    """The address the rate limit counts, from a request's headers (`header(name)`).

    A request that carries the operator's Front Door id (`X-Azure-FDID`, compared in constant
    time) counts by `X-Azure-SocketIP`, the address that opened the connection to Front Door.
    Front Door's `X-Azure-ClientIP` is never read: it takes a client's own X-Forwarded-For.
    Any other request counts by `client_ip(X-Forwarded-For, hops)`."""
    if front_door_id and _same_id(header("x-azure-fdid"), front_door_id):
        return _address(header("x-azure-socketip") or "")
    return client_ip(header("x-forwarded-for"), hops)


def _same_id(sent: str | None, configured: str) -> bool:
    """Whether the request carries the operator's Front Door id. The setting is canonical (read
    by `SettingReader.guid`); the header is taken in any form a GUID is written."""
    given = canonical_guid(sent) if sent is not None else None
    if given is None:
        return False
    return hmac.compare_digest(given.encode(), configured.encode())


def client_ip(forwarded_for: str | None, hops: int = 0) -> str:
    """The X-Forwarded-For entry `hops` places left of the rightmost, port stripped.

    Azure's front end appends the address it saw, so with no proxy of the operator's own in
    front of it (`hops` 0) the rightmost entry is the client. Each trusted proxy appended the
    address it saw before that, so with `hops` of them the client is `hops` entries further
    left. Entries further left are whatever the client sent and are never trusted; a header
    with too few entries, or an unparseable one, is "unknown" (one bucket), never a guess.
    """
    if not forwarded_for:
        return UNKNOWN_IP
    entries = forwarded_for.split(",")
    if hops < 0 or hops >= len(entries):
        return UNKNOWN_IP
    return _address(entries[-1 - hops])


def _address(entry: str) -> str:
    """An address as a proxy writes it (`a.b.c.d`, `a.b.c.d:port`, `[v6]:port`, bare v6), in its
    one canonical text; anything else is "unknown"."""
    entry = entry.strip()
    if entry.startswith("["):
        entry = entry[1:].split("]", 1)[0]
    elif entry.count(":") == 1:
        entry = entry.split(":", 1)[0]
    try:
        return ipaddress.ip_address(entry).compressed
    except ValueError:
        return UNKNOWN_IP
