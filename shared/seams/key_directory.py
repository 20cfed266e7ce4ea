"""Agents' key directories (Web Bot Auth): `<origin>/.well-known/http-message-signatures-directory`,
a JWKS of the agent's Ed25519 keys. Fetched over HTTPS (plain HTTP and loopback only off Azure),
never through a proxy or a redirect, from a public address only (checked on the socket actually
connected, so DNS cannot swap in a private one), bounded in size and time, and cached per origin
for as long as its Cache-Control allows within bounds; a failure is remembered for a short while.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

DIRECTORY_PATH = "/.well-known/http-message-signatures-directory"
MEDIA_TYPE = "application/http-message-signatures-directory+json"
MAX_BYTES = 64 * 1024
TIMEOUT_SECONDS = 3.0
MIN_TTL, DEFAULT_TTL, MAX_TTL = 60, 300, 3600
FAILURE_TTL = 30
NOT_PUBLIC = "resolves to an address that is not public"
MAX_KEYS = 64
MAX_ORIGINS = 1000  # directories kept in one instance's cache


class DirectoryUnavailable(Exception):
    """The directory could not be used; the message says why, for the caller's 401."""


@dataclass(frozen=True)
class Directory:
    keys: dict[str, bytes]  # JWK thumbprint (RFC 7638) → raw Ed25519 public key
    fetched_at: float
    expires_at: float


def thumbprint(x: str) -> str:
    """The RFC 7638 thumbprint of an Ed25519 JWK with public key `x` (base64url), as Web Bot Auth
    names keys: SHA-256 over the required members in lexical order, base64url without padding."""
    canonical = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


class KeyDirectories:
    def __init__(
        self,
        *,
        local: bool,
        timeout: float = TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`local`: not hosted on Azure, so plain HTTP and private or loopback addresses are allowed
        (a developer's agent serves its directory on localhost)."""
        self._local = local
        self._timeout = timeout
        self._clock = clock
        self._session = _session(public_only=not local)
        self._cache: dict[str, Directory | DirectoryUnavailable] = {}
        self._failed_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def keys(self, origin: str, *, older_than: float | None = None) -> Directory:
        """The origin's directory, from the cache while it is fresh; fetched again when it is older
        than `older_than` seconds (a key the cached copy lacks may be new). Raises
        DirectoryUnavailable."""
        now = self._clock()
        with self._lock:
            cached = self._cache.get(origin)
        if isinstance(cached, DirectoryUnavailable):
            if now - self._failed_at.get(origin, 0.0) < FAILURE_TTL:
                raise cached
        elif (
            cached is not None
            and now < cached.expires_at
            and (older_than is None or now - cached.fetched_at < older_than)
        ):
            return cached
        try:
            found: Directory | DirectoryUnavailable = self._fetch(origin, now)
        except DirectoryUnavailable as exc:
            found = exc
        with self._lock:
            if len(self._cache) > MAX_ORIGINS:
                self._cache.clear()
                self._failed_at.clear()
            self._cache[origin] = found
            if isinstance(found, DirectoryUnavailable):
                self._failed_at[origin] = now
        if isinstance(found, DirectoryUnavailable):
            raise found
        return found

    def _fetch(self, origin: str, now: float) -> Directory:
        if not (origin.startswith("https://") or (self._local and origin.startswith("http://"))):
            raise DirectoryUnavailable("the key directory must be served over HTTPS")
        deadline = time.monotonic() + self._timeout
        try:
            with self._session.get(
                origin + DIRECTORY_PATH,
                headers={"Accept": f"{MEDIA_TYPE}, application/json"},
                timeout=self._timeout,
                allow_redirects=False,
                stream=True,
            ) as response:
                if response.status_code != 200:
                    raise DirectoryUnavailable(f"the key directory answered HTTP {response.status_code}")
                body = _bounded(response, deadline)
                ttl = _ttl(response.headers.get("cache-control", ""))
        except requests.RequestException as exc:
            why = "its host is not a public address" if NOT_PUBLIC in str(exc) else type(exc).__name__
            raise DirectoryUnavailable(f"the key directory could not be fetched ({why})") from None
        return Directory(_ed25519_keys(body), now, now + ttl)


def _bounded(response: requests.Response, deadline: float) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BYTES:
        raise DirectoryUnavailable(f"the key directory is larger than {MAX_BYTES} bytes")
    body = bytearray()
    for chunk in response.iter_content(8192):
        body += chunk
        if len(body) > MAX_BYTES:
            raise DirectoryUnavailable(f"the key directory is larger than {MAX_BYTES} bytes")
        if time.monotonic() > deadline:
            raise DirectoryUnavailable("the key directory took too long to arrive")
    return bytes(body)


def _ed25519_keys(body: bytes) -> dict[str, bytes]:
    """The directory's Ed25519 keys by thumbprint; other keys are skipped, a document that is not
    a JWKS, or has no Ed25519 key, is refused."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise DirectoryUnavailable("the key directory is not JSON") from None
    listed = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(listed, list):
        raise DirectoryUnavailable("the key directory is not a JWKS (no keys array)")
    keys: dict[str, bytes] = {}
    for jwk in listed[:MAX_KEYS]:
        if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            continue
        x = jwk.get("x")
        raw = _base64url(x) if isinstance(x, str) else None
        if raw is not None and len(raw) == 32:
            keys[thumbprint(x)] = raw  # type: ignore[arg-type]
    if not keys:
        raise DirectoryUnavailable("the key directory holds no Ed25519 key")
    return keys


def _base64url(text: str) -> bytes | None:
    if not text or len(text) > 100 or not text.replace("-", "").replace("_", "").isalnum():
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None


def _ttl(cache_control: str) -> int:
    """Seconds to keep the directory: its max-age (no-store and no-cache as 0), held within
    [MIN_TTL, MAX_TTL]; DEFAULT_TTL when it says nothing."""
    ttl = DEFAULT_TTL
    for directive in cache_control.lower().split(","):
        name, _, value = directive.strip().partition("=")
        if name in ("no-store", "no-cache"):
            ttl = 0
        elif name in ("max-age", "s-maxage") and value.strip('"').isdigit():
            ttl = int(value.strip('"'))
    return max(MIN_TTL, min(MAX_TTL, ttl))


def is_public(address: str) -> bool:
    """Whether an address is on the public internet: not private, loopback, link-local, shared
    (CGNAT), multicast or reserved; an IPv4-mapped IPv6 address as its IPv4 address."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _checked(sock, host: str):
    peer = sock.getpeername()[0]
    if not is_public(peer):
        sock.close()
        raise OSError(f"{host}: {NOT_PUBLIC}")
    return sock


class _PublicHTTP(HTTPConnection):
    def _new_conn(self):
        return _checked(super()._new_conn(), self.host)


class _PublicHTTPS(HTTPSConnection):
    def _new_conn(self):
        return _checked(super()._new_conn(), self.host)


class _PublicPool(HTTPConnectionPool):
    ConnectionCls = _PublicHTTP


class _PublicHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _PublicHTTPS


class _PublicOnly(HTTPAdapter):
    """Connections to public addresses only, checked after connecting, before any byte is sent."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _PublicPool, "https": _PublicHTTPSPool}


def _session(*, public_only: bool) -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment: the peer checked is the directory
    if public_only:
        adapter = _PublicOnly()
        session.mount("http://", adapter)
        session.mount("https://", adapter)
    return session
