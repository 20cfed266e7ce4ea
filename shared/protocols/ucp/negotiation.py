"""UCP's negotiation on every request (overview/index.md "Platform Advertisement on Request",
"Request-Time Validation", "Intersection Algorithm"): the `UCP-Agent` header names the platform's
profile; the store reads it from its registry of pre-approved platforms or fetches it (bounded,
public addresses only on Azure, cached), checks its version and that it shares the capability the
operation needs. Each refusal is UCP's own code and status (overview "Error Codes")."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import http_sf

from shared.config.urls import canonical_url
from shared.protocols.ucp.catalog import VERSION
from shared.protocols.ucp.profile import CAPABILITIES
from shared.seams.public_fetch import FetchBusy, FetchFailed, PublicFetcher

PROFILE_TTL_SECONDS = 300  # at least 60 (overview "Fetching")
FAILURE_TTL_SECONDS = 30
REFRESH_SECONDS = 60  # the least age at which an unknown key id fetches the profile again
MAX_PROFILES = 1000
MAX_PROFILE_BYTES = 128 * 1024


@dataclass(frozen=True)
class Refusal(Exception):
    """A negotiation refusal: UCP's code, the HTTP status its REST binding gives it, the words."""

    code: str
    status: int
    content: str
    lasting: bool = True  # False: the store was busy, not the profile at fault; never cached

    def body(self, continue_url: str) -> dict:
        return {"code": self.code, "content": self.content, "continue_url": continue_url}


class Platforms:
    def __init__(
        self,
        registry: Mapping[str, dict],
        fetcher: PublicFetcher,
        *,
        local: bool,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`registry`: pre-approved platforms' profiles by URL (overview "Fetching": businesses
        SHOULD keep one), used without a fetch. `local`: off Azure, http:// profiles are read."""
        self._registry = dict(registry)
        self._fetcher = fetcher
        self._local = local
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, dict | Refusal]] = OrderedDict()
        self._lock = threading.Lock()

    def negotiate(self, header: str | None, capability: str) -> str:
        """The platform's profile URL, once its profile is read, its version is this store's and
        it shares `capability`. Raises Refusal."""
        url = profile_url(header, local=self._local)
        profile = self._profile(url)
        ucp = profile.get("ucp")
        if not isinstance(ucp, dict) or not isinstance(ucp.get("version"), str):
            raise Refusal("profile_malformed", 422, "the platform profile has no ucp.version")
        if ucp["version"] != VERSION:
            raise Refusal("version_unsupported", 422, f"this business speaks UCP {VERSION} only")
        offered = ucp.get("capabilities")
        entries = offered.get(capability) if isinstance(offered, dict) else None
        if not isinstance(entries, list) or not any(
            isinstance(e, dict) and e.get("version") == VERSION for e in entries
        ):
            raise Refusal("capabilities_incompatible", 200, f"the platform does not declare {capability}")
        return url

    def profile(self, url: str) -> dict:
        """The platform's profile as negotiation read it (a pre-approved one's as the registry
        gives it). Raises Refusal."""
        return self._profile(url)

    def keys(self, url: str, *, fresh: bool = False) -> list[dict]:
        """The signing keys (`keys[]`) of the platform's profile as fetched, a pre-approved one's
        too (its keys are what it publishes). `fresh`: a key was not found, so a copy older than
        REFRESH_SECONDS is fetched again (overview "Fetching": at most once per TTL). Raises Refusal."""
        profile = self._fetched(url, REFRESH_SECONDS if fresh else None)
        keys = profile.get("keys")
        return [key for key in keys if isinstance(key, dict)] if isinstance(keys, list) else []

    def _profile(self, url: str) -> dict:
        """The platform's profile: pre-approved, cached (a failure for FAILURE_TTL_SECONDS, so
        a caller naming an unreachable profile does not make every request fetch it), or fetched."""
        if url in self._registry:
            return self._registry[url]
        return self._fetched(url)

    def _fetched(self, url: str, max_age: float | None = None) -> dict:
        now = self._clock()
        with self._lock:
            cached = self._cache.get(url)
        if cached is not None:
            at, found = cached
            ttl = FAILURE_TTL_SECONDS if isinstance(found, Refusal) else PROFILE_TTL_SECONDS
            if now - at < (ttl if max_age is None else min(ttl, max_age)):
                if isinstance(found, Refusal):
                    raise found
                return found
        try:
            found = self._fetch(url)
        except Refusal as refusal:
            if not refusal.lasting:
                raise
            found = refusal
        with self._lock:
            self._cache[url] = (now, found)
            self._cache.move_to_end(url)
            while len(self._cache) > MAX_PROFILES:
                self._cache.popitem(last=False)
        if isinstance(found, Refusal):
            raise found
        return found

    def _fetch(self, url: str) -> dict:
        try:
            answer = self._fetcher.get(url, "application/json")
        except FetchFailed as exc:
            lasting = not isinstance(exc, FetchBusy)
            content = f"the platform profile cannot be fetched: {exc}"
            raise Refusal("profile_unreachable", 424, content, lasting) from None
        if answer.status != 200:
            raise Refusal("profile_unreachable", 424, f"the platform profile answered HTTP {answer.status}")
        try:
            profile = json.loads(answer.body)
        except (ValueError, RecursionError):
            raise Refusal("profile_malformed", 422, "the platform profile is not JSON") from None
        if not isinstance(profile, dict):
            raise Refusal("profile_malformed", 422, "the platform profile is not a JSON object")
        return profile


def profile_url(header: str | None, *, local: bool) -> str:
    """The `profile` member of a UCP-Agent header (an RFC 8941 dictionary whose `profile` is a
    string holding an https URL; other members and parameters are ignored). Raises Refusal."""
    if not header:
        raise Refusal(
            "invalid_profile_url", 400, "every UCP request needs a UCP-Agent header naming a profile"
        )
    try:
        members = cast(dict[str, Any], http_sf.parse(header.encode(), tltype="dictionary"))
        value = members["profile"][0]
    except Exception:  # http_sf raises ValueError and others on malformed input; KeyError: no member
        raise Refusal(
            "invalid_profile_url", 400, 'UCP-Agent must be a dictionary with profile="<https URL>"'
        ) from None
    schemes = ("https", "http") if local else ("https",)
    try:
        return canonical_url(value if isinstance(value, str) else "", schemes)
    except ValueError:
        raise Refusal("invalid_profile_url", 400, "the UCP-Agent profile must be an https URL") from None


def pre_approved() -> dict:
    """The profile a platform the operator pre-approved is taken to have: this store's version and
    every capability the store offers (`STOREFRONT_UCP_PLATFORMS`; docs/ucp.md)."""
    offered = {name: [{"version": VERSION}] for name in CAPABILITIES}
    return {"ucp": {"version": VERSION, "services": {}, "capabilities": offered, "payment_handlers": {}}}
