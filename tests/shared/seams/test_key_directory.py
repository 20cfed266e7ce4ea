"""shared.seams.key_directory: which keys a directory gives, how long it is kept, and what many
callers at once, or a directory that stops answering, do to the cache. Fetching is tested in
test_public_fetch.py; signatures end to end in tests/shared/protocols/test_agents.py."""

from __future__ import annotations

import base64
import json
import threading

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from shared.seams import key_directory
from shared.seams.key_directory import (
    MAX_TTL,
    MIN_TTL,
    SMALL_ORDER,
    DirectoryUnavailable,
    KeyDirectories,
    _ed25519_keys,
    _ttl,
    thumbprint,
)
from tests.agents import AgentKey, KeyDirectory

pytestmark = pytest.mark.services  # serves directories on loopback


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
        ("max-age=\u00b2", 300),  # a digit to str.isdigit, not to int
        ("max-age=" + "9" * 5000, 300),
    ],
)
def test_a_directory_is_kept_as_its_headers_say_within_bounds(cache_control, seconds):
    assert _ttl(cache_control) == seconds


def test_the_thumbprint_is_rfc_7638s():
    # RFC 9421's Ed25519 test key, whose thumbprint Web Bot Auth's own test vectors name.
    x = "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"
    assert thumbprint(x) == "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"


def test_one_key_is_one_thumbprint_however_its_x_is_spelled():
    """The last base64url character of a 32-byte key carries 2 unused bits: the other spellings of
    one key would give it other thumbprints, and so other rate buckets. Only the canonical one counts."""
    x = AgentKey().x
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    base = alphabet.index(x[-1]) & ~0b11
    spellings = [x[:-1] + alphabet[base + low] for low in range(4)]
    jwks = b'{"keys": [%s]}' % b",".join(
        b'{"kty":"OKP","crv":"Ed25519","x":"%s"}' % s.encode() for s in spellings
    )

    assert list(_ed25519_keys(jwks)) == [thumbprint(x)]


def test_callers_at_once_share_one_fetch(directory):
    directory.delay = 0.3
    directories = KeyDirectories(local=True)
    found: list[object] = []
    threads = [
        threading.Thread(target=lambda: found.append(directories.keys(directory.origin))) for _ in range(10)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert len(found) == 10 and directory.hits == 1


def test_a_failed_refetch_keeps_the_copy_that_is_still_fresh(directory):
    now = [1000.0]
    directories = KeyDirectories(local=True, clock=lambda: now[0])
    good = directories.keys(directory.origin)
    directory.status = 503
    now[0] += 120

    assert directories.keys(directory.origin, older_than=60) == good, "a stranger's unknown keyid"
    assert directories.keys(directory.origin, older_than=60) == good
    assert directory.hits == 2, "the failure is remembered: not fetched again at once"


def test_the_least_recently_used_directories_leave_the_cache_first(monkeypatch):
    monkeypatch.setattr(key_directory, "MAX_ORIGINS", 2)
    served = [KeyDirectory(AgentKey()) for _ in range(3)]
    try:
        directories = KeyDirectories(local=True)
        directories.keys(served[0].origin)
        directories.keys(served[1].origin)
        directories.keys(served[0].origin)  # used again: the second is now the oldest
        directories.keys(served[2].origin)
        directories.keys(served[0].origin)
        directories.keys(served[1].origin)

        assert [d.hits for d in served] == [1, 2, 1]
    finally:
        for d in served:
            d.close()


@pytest.fixture
def directory():
    served = KeyDirectory(AgentKey())
    yield served
    served.close()


@pytest.mark.parametrize("point", SMALL_ORDER, ids=lambda p: p.hex()[:8])
@pytest.mark.parametrize("sign", [0, 0x80])
def test_a_key_of_small_order_is_never_read_from_a_directory(point, sign):
    """With such a key, a signature of the identity point and zero verifies for many messages
    (for the identity itself, all): anyone could sign as the agent."""
    raw = point[:31] + bytes([point[31] | sign])
    forged = (1).to_bytes(32, "little") + bytes(32)
    if sign == 0:  # the forgery is real: the library accepts it for some of a few messages
        public = Ed25519PublicKey.from_public_bytes(raw)
        assert any(_verifies(public, forged, bytes([i])) for i in range(64))
    x = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    jwks = json.dumps({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x}, AgentKey().public_jwk]})

    assert thumbprint(x) not in _ed25519_keys(jwks.encode())


def _verifies(public: Ed25519PublicKey, signature: bytes, message: bytes) -> bool:
    try:
        public.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def test_a_fetch_refused_because_this_instance_was_busy_is_not_remembered(directory):
    from shared.seams.public_fetch import MAX_CONCURRENT

    directories = KeyDirectories(local=True)
    slots = directories._fetcher._slots
    for _ in range(MAX_CONCURRENT):
        slots.acquire()  # every slot taken by strangers' slow directories
    with pytest.raises(DirectoryUnavailable):
        directories.keys(directory.origin)
    for _ in range(MAX_CONCURRENT):
        slots.release()

    assert directories.keys(directory.origin).keys, "fetched at once, not after the failure TTL"
