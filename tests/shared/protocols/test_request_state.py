"""The sealed requestState on its own: it opens only with the store's secret, for the claims it was
sealed with, until it expires; the request-level behaviour is in tests/shared/protocols/test_mcp_modern.py."""

from __future__ import annotations

import base64
import json

import pytest

from shared.config.hashing import Hasher
from shared.protocols.mcp import request_state


def test_a_sealed_state_opens_only_for_its_claims_before_it_expires():
    hasher = Hasher("secret-for-this-test")
    claims = {"tool": "purchase_free_bundle", "arguments": request_state.digest({"b": 1, "a": 2})}
    state = request_state.seal(hasher, claims, now=1_000, ttl=60)

    assert request_state.unseal(hasher, state, claims, now=1_060)["tool"]
    with pytest.raises(request_state.Expired):
        request_state.unseal(hasher, state, claims, now=1_061)
    with pytest.raises(request_state.InvalidState, match="another request"):
        request_state.unseal(
            hasher, state, {**claims, "arguments": request_state.digest({}), "x": 1}, now=1_000
        )
    with pytest.raises(request_state.InvalidState):
        request_state.unseal(Hasher("another-secret"), state, claims, now=1_000)
    assert request_state.digest({"a": 2, "b": 1}) == claims["arguments"]
    assert json.loads(base64.urlsafe_b64decode(state.split(".")[1] + "==")).keys() == {
        "tool",
        "arguments",
        "exp",
    }
