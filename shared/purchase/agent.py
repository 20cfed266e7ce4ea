"""Who asked for a purchase, when an agent proved it: the identity a verified Web Bot Auth
signature gives (shared.protocols.agents verifies it; governance counts it; the receipt names it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Agent:
    """An agent whose Web Bot Auth signature verified: its key directory's origin and the key's
    JWK thumbprint (shared.protocols.agents)."""

    origin: str
    key: str

    def as_dict(self) -> dict[str, object]:
        return {"verified": True, "origin": self.origin, "key_thumbprint": self.key}


UNVERIFIED: dict[str, object] = {"verified": False}
