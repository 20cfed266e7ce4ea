"""shared.seams.key_directory: which addresses a directory may be fetched from, and how long a
directory is kept. Fetching, sizes and failures end to end are in tests/shared/protocols/test_agents.py."""

from __future__ import annotations

import pytest
import requests

from shared.seams.key_directory import (
    MAX_TTL,
    MIN_TTL,
    NOT_PUBLIC,
    DirectoryUnavailable,
    KeyDirectories,
    _session,
    _ttl,
    is_public,
    thumbprint,
)
from tests.agents import AgentKey, KeyDirectory

pytestmark = pytest.mark.services  # serves a directory on loopback


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:4700::6810:84e5", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # the cloud metadata service
        ("100.64.0.1", False),  # shared address space (CGNAT)
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("224.0.0.1", False),
        ("not an address", False),
    ],
)
def test_only_public_addresses_are_public(address, public):
    assert is_public(address) is public


def test_on_azure_a_directory_on_a_loopback_address_is_never_connected_to():
    served = KeyDirectory(AgentKey())
    try:
        with pytest.raises(requests.ConnectionError, match=NOT_PUBLIC):
            _session(public_only=True).get(served.url, timeout=2)
        assert served.hits == 0, "refused after connecting, before a byte of the request was sent"
    finally:
        served.close()


def test_on_azure_only_https_directories_are_fetched():
    with pytest.raises(DirectoryUnavailable, match="HTTPS"):
        KeyDirectories(local=False).keys("http://agent.example")


@pytest.mark.parametrize(
    ("cache_control", "seconds"),
    [
        ("", 300),
        ("max-age=120", 120),
        ("max-age=5", MIN_TTL),
        ("max-age=99999999", MAX_TTL),
        ("no-store", MIN_TTL),
        ('public, max-age="600"', 600),
        ("max-age=abc", 300),
    ],
)
def test_a_directory_is_kept_as_its_headers_say_within_bounds(cache_control, seconds):
    assert _ttl(cache_control) == seconds


def test_the_thumbprint_is_rfc_7638s():
    # RFC 9421's Ed25519 test key, whose thumbprint Web Bot Auth's own test vectors name.
    assert (
        thumbprint("JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs")
        == "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"
    )
