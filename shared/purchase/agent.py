"""Who asked for a purchase, when an agent proved it: the identity a verified Web Bot Auth
signature gives (shared.protocols.agents verifies it; governance counts it; the receipt names it)."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from publicsuffixlist import PublicSuffixList


@dataclass(frozen=True)
class Agent:
    """An agent whose Web Bot Auth signature verified: its key directory's origin and the key's
    JWK thumbprint (shared.protocols.agents)."""

    origin: str
    key: str

    def as_dict(self) -> dict[str, object]:
        return {"verified": True, "origin": self.origin, "key_thumbprint": self.key}

    @property
    def site(self) -> str:
        """Who answers for the origin: its registrable domain under the Public Suffix List
        (`a.b.agent.example` → `agent.example`, `x.github.io` stays itself), or the host when it has
        none (an IP address, `localhost`). Subdomains and ports of one site are one site."""
        host = urlsplit(self.origin).hostname or self.origin
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return _suffixes().privatesuffix(host) or host
        return host


@functools.cache
def _suffixes() -> PublicSuffixList:
    """The Public Suffix List the package ships (read once, on the first verified agent)."""
    return PublicSuffixList()


UNVERIFIED: dict[str, object] = {"verified": False}
