"""shared.protocols.ucp.negotiation: the UCP-Agent header, the platform's profile (pre-approved or
fetched from loopback here) and each of overview/index.md's refusals, with its code and status."""

from __future__ import annotations

import pytest

from shared.protocols.ucp.catalog import SEARCH, VERSION
from shared.protocols.ucp.negotiation import Platforms, Refusal, profile_url
from shared.seams.public_fetch import PublicFetcher
from tests.agents import KeyDirectory

pytestmark = pytest.mark.services  # serves platform profiles on loopback


def platform_profile(version: str = VERSION, capabilities: dict | None = None) -> dict:
    offered = {SEARCH: [{"version": VERSION}]} if capabilities is None else capabilities
    return {"ucp": {"version": version, "services": {}, "capabilities": offered, "payment_handlers": {}}}


def platforms(registry: dict | None = None, *, local: bool = True) -> Platforms:
    return Platforms(registry or {}, PublicFetcher(local=local, timeout=2, max_bytes=128 * 1024), local=local)


@pytest.fixture
def served():
    server = KeyDirectory()
    server.document = platform_profile()
    yield server
    server.close()


def test_a_fetched_profile_that_shares_the_capability_is_accepted_and_cached(served):
    check = platforms()
    header = f'profile="{served.origin}/.well-known/ucp"'

    assert check.negotiate(header, SEARCH) == f"{served.origin}/.well-known/ucp"
    assert check.negotiate(header, SEARCH) and served.hits == 1


def test_a_pre_approved_platform_is_never_fetched():
    url = "https://platform.example/agent"
    check = platforms({url: platform_profile()})

    assert check.negotiate(f'profile="{url}"; version="2026-08-25", other=1', SEARCH) == url


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "profile=https://platform.example/p",
        'profile="ftp://platform.example/p"',
        "profile",
        'agent="x"',
        '"profile"',
        'profile="https://user@platform.example/p"',
    ],
)
def test_a_missing_or_malformed_ucp_agent_is_invalid_profile_url(header):
    with pytest.raises(Refusal) as refused:
        profile_url(header, local=False)
    assert (refused.value.code, refused.value.status) == ("invalid_profile_url", 400)


REFUSALS = {
    "not found": ({"status": 404}, "profile_unreachable", 424),
    "not JSON": ({"document": b"<html>"}, "profile_malformed", 422),
    "no version": ({"document": {"ucp": {}}}, "profile_malformed", 422),
    "another version": ({"document": platform_profile("2026-01-11")}, "version_unsupported", 422),
    "no shared capability": (
        {"document": platform_profile(capabilities={})},
        "capabilities_incompatible",
        200,
    ),
    "the capability at another version": (
        {"document": platform_profile(capabilities={SEARCH: [{"version": "2026-01-11"}]})},
        "capabilities_incompatible",
        200,
    ),
}


@pytest.mark.parametrize(("served_as", "code", "status"), REFUSALS.values(), ids=REFUSALS.keys())
def test_each_refusal_has_ucps_code_and_status(served, served_as, code, status):
    for name, value in served_as.items():
        setattr(served, name, value)

    with pytest.raises(Refusal) as refused:
        platforms().negotiate(f'profile="{served.origin}/.well-known/ucp"', SEARCH)

    assert (refused.value.code, refused.value.status) == (code, status)


def test_on_azure_a_profile_on_a_loopback_address_is_never_fetched(served):
    with pytest.raises(Refusal) as refused:
        platforms(local=False).negotiate(f'profile="{served.origin.replace("http", "https")}/p"', SEARCH)

    assert refused.value.code == "profile_unreachable" and served.hits == 0


def test_a_profile_that_failed_is_not_fetched_again_at_once(served):
    served.status = 404
    check = platforms()
    for _ in range(3):
        with pytest.raises(Refusal):
            check.negotiate(f'profile="{served.origin}/.well-known/ucp"', SEARCH)

    assert served.hits == 1


def test_a_fetch_refused_because_the_store_was_busy_is_not_remembered():
    """Strangers naming slow profiles can take every fetch slot for a moment; a real platform
    refused then must get in as soon as a slot is free, not 30 seconds later."""
    from shared.seams.public_fetch import MAX_CONCURRENT

    served = KeyDirectory()
    served.document = {"ucp": {"version": VERSION, "capabilities": {SEARCH: [{"version": VERSION}]}}}
    fetcher = PublicFetcher(local=True, timeout=2, max_bytes=128 * 1024)
    found = Platforms({}, fetcher, local=True)
    header = f'profile="{served.origin}/.well-known/ucp"'
    try:
        for _ in range(MAX_CONCURRENT):
            fetcher._slots.acquire()  # every slot busy with someone else's slow profile
        with pytest.raises(Refusal) as busy:
            found.negotiate(header, SEARCH)
        for _ in range(MAX_CONCURRENT):
            fetcher._slots.release()

        url = found.negotiate(header, SEARCH)
    finally:
        served.close()

    assert busy.value.status == 424 and "at once" in busy.value.content
    assert url == f"{served.origin}/.well-known/ucp"
