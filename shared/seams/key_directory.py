"""Agents' key directories (Web Bot Auth): `<origin>/.well-known/http-message-signatures-directory`,
a JWKS of the agent's Ed25519 keys, fetched through `shared.seams.public_fetch` (HTTPS and public
addresses only on Azure, a hard deadline, a size cap) and cached per origin for as long as its
Cache-Control allows within bounds. One fetch per origin at a time; a failure is remembered for a
short while, and never replaces a copy that is still fresh.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from shared.seams.public_fetch import FetchBusy, FetchFailed, PublicFetcher, whole_number

DIRECTORY_PATH = "/.well-known/http-message-signatures-directory"
MEDIA_TYPE = "application/http-message-signatures-directory+json"
MAX_BYTES = 64 * 1024
TIMEOUT_SECONDS = 3.0
MIN_TTL, DEFAULT_TTL, MAX_TTL = 60, 300, 3600
FAILURE_TTL = 30
MAX_KEYS = 64
MAX_ORIGINS = 1000  # directories kept in one instance's cache, the least recently used dropped
_BASE64URL = re.compile(r"[A-Za-z0-9_-]{43}")  # 32 bytes, unpadded
_P = 2**255 - 19
# Ed25519 points of small order (as libsodium lists them, the sign bit aside): with one as its
# key, a forged signature (R the identity, S zero) verifies for many or all messages.
SMALL_ORDER = tuple(
    [bytes(32), (1).to_bytes(32, "little")]
    + [
        bytes.fromhex(h)
        for h in (
            "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
            "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        )
    ]
    + [(_P + d).to_bytes(32, "little") for d in (-1, 0, 1)]
)


class DirectoryUnavailable(Exception):
    """The directory could not be used; the message says why, for the caller's 401."""


class DirectoryBusy(DirectoryUnavailable):
    """This instance was fetching as many documents as it may: not remembered as a failure."""


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
        self._fetcher = PublicFetcher(local=local, timeout=timeout, max_bytes=MAX_BYTES)
        self._timeout = timeout
        self._clock = clock
        self._cache: OrderedDict[str, Directory] = OrderedDict()
        self._failures: OrderedDict[str, tuple[float, DirectoryUnavailable]] = OrderedDict()
        self._inflight: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def keys(self, origin: str, *, older_than: float | None = None) -> Directory:
        """The origin's directory, from the cache while it is fresh; fetched again when it is older
        than `older_than` seconds (a key the cached copy lacks may be new), unless the last fetch
        failed within FAILURE_TTL. Raises DirectoryUnavailable."""
        while True:
            now = self._clock()
            with self._lock:
                cached = self._cache.get(origin)
                fresh = cached if cached is not None and now < cached.expires_at else None
                failed = self._failures.get(origin)
                recent_failure = failed is not None and now - failed[0] < FAILURE_TTL
                if fresh is not None and (
                    recent_failure or older_than is None or now - fresh.fetched_at < older_than
                ):
                    self._cache.move_to_end(origin)
                    return fresh
                if fresh is None and recent_failure:
                    raise failed[1]  # type: ignore[index]
                waiting = self._inflight.get(origin)
                if waiting is None:
                    done = self._inflight[origin] = threading.Event()
                    break
            if not waiting.wait(self._timeout + 1):  # another thread is fetching it: use its result
                raise DirectoryUnavailable("the key directory could not be fetched in time")
            older_than = None
        try:
            return self._refresh(origin, now, fresh)
        finally:
            with self._lock:
                del self._inflight[origin]
            done.set()

    def _refresh(self, origin: str, now: float, fresh: Directory | None) -> Directory:
        try:
            found = self._fetch(origin, now)
        except DirectoryUnavailable as exc:
            if not isinstance(exc, DirectoryBusy):
                with self._lock:
                    _put(self._failures, origin, (now, exc))
            if fresh is not None:
                return fresh
            raise
        with self._lock:
            _put(self._cache, origin, found)
            self._failures.pop(origin, None)
        return found

    def _fetch(self, origin: str, now: float) -> Directory:
        try:
            answer = self._fetcher.get(origin + DIRECTORY_PATH, f"{MEDIA_TYPE}, application/json")
        except FetchBusy as exc:  # this instance was busy: nothing to remember about the directory
            raise DirectoryBusy(f"the key directory cannot be fetched now: {exc}") from None
        except FetchFailed as exc:
            raise DirectoryUnavailable(f"the key directory cannot be fetched: {exc}") from None
        if answer.status != 200:
            raise DirectoryUnavailable(f"the key directory answered HTTP {answer.status}")
        return Directory(_ed25519_keys(answer.body), now, now + _ttl(answer.headers.get("cache-control", "")))


def _put(cache: OrderedDict, origin: str, value: object) -> None:
    cache[origin] = value
    cache.move_to_end(origin)
    while len(cache) > MAX_ORIGINS:
        cache.popitem(last=False)


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
        raw = ed25519_public(x)
        if raw is not None and isinstance(x, str):
            keys[thumbprint(x)] = raw  # one spelling per key, and no key anyone can sign for
    if not keys:
        raise DirectoryUnavailable("the key directory holds no Ed25519 key")
    return keys


def ed25519_public(x: object) -> bytes | None:
    """The raw Ed25519 public key a JWK's `x` spells, if it spells it the one canonical way and
    it is not of small order (a key anyone can sign for); else None."""
    if not isinstance(x, str) or not _BASE64URL.fullmatch(x):
        return None
    raw = base64.urlsafe_b64decode(x + "=")
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != x or len(raw) != 32 or _small_order(raw):
        return None
    return raw


def _base64url(text: str) -> bytes | None:
    if not text or len(text) > 100 or not text.replace("-", "").replace("_", "").isalnum():
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None


def _small_order(raw: bytes) -> bool:
    unsigned = raw[:31] + bytes([raw[31] & 0x7F])
    return unsigned in SMALL_ORDER


def _ttl(cache_control: str) -> int:
    """Seconds to keep the directory: its max-age (no-store and no-cache as 0), held within
    [MIN_TTL, MAX_TTL]; DEFAULT_TTL when it says nothing."""
    ttl = DEFAULT_TTL
    for directive in cache_control.lower().split(","):
        name, _, value = directive.strip().partition("=")
        seconds = whole_number(value.strip('"'))
        if name in ("no-store", "no-cache"):
            ttl = 0
        elif name in ("max-age", "s-maxage") and seconds is not None:
            ttl = seconds
    return max(MIN_TTL, min(MAX_TTL, ttl))
