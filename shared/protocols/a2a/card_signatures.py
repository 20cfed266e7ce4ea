"""The agent card's signatures (A2A 1.0 §8.4): each a JWS by the store's current ES256 key over
the RFC 8785 canonical form of a card without its `signatures`, kept as the spec's
`AgentCardSignature` (`protected`, `signature`; the payload is the card itself). The protected
header names the key (`kid`) and where it is published (`jku`, the store's JWKS).

The card is signed as each kind of reader rebuilds it, so a verifier of either kind finds one
signature that holds: first the card as A2A 1.0 reads it (its 1.0 fields: a 1.0 client parses the
card into its 1.0 model, which drops the fields only 0.3 defines), then the card as served, 0.3
fields included, for a verifier that canonicalises the JSON it fetched.
"""

from __future__ import annotations

import functools

import rfc8785
from jose import jws

from shared.config.keys import ALGORITHM, KeySet

TYPE = "JOSE"  # what A2A 1.0 §8.4.2 asks `typ` to be


def canonical(card: dict) -> bytes:
    """What a signature covers: the card without `signatures`, canonical by RFC 8785."""
    return rfc8785.dumps({name: value for name, value in card.items() if name != "signatures"})


def header(keys: KeySet, jku: str) -> dict[str, str]:
    """The protected header every signature of the card carries."""
    return {"alg": ALGORITHM, "kid": keys.kid, "jku": jku, "typ": TYPE}


def sign(views: list[dict], keys: KeySet, jku: str) -> list[dict[str, str]]:
    """One `AgentCardSignature` for each view of the card, in order."""
    members = tuple(header(keys, jku).items())
    return [dict(_signature(canonical(view), keys.private_pem, members)) for view in views]


@functools.lru_cache(maxsize=16)
def _signature(
    payload: bytes, private_pem: str, members: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """ES256 signatures are randomised: this process signs a card once per key, so its answers
    stay byte-identical (the ETag never depends on these bytes; see card.py)."""
    compact = jws.sign(payload, private_pem, headers=dict(members), algorithm=ALGORITHM)
    protected, _, signature = compact.split(".")
    return (("protected", protected), ("signature", signature))
